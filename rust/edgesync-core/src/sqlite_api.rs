//! The SQLite C API, resolved at run time from a library that is already loaded.
//!
//! edgesync never links a SQLite of its own. SQLite's unix VFS keeps its POSIX
//! advisory locks in a table of open inodes that is private to one copy of the
//! library: a second copy in the same process would not know the first one's locks,
//! and closing its file descriptor would silently drop them (POSIX releases every lock
//! a process holds on a file when any descriptor of it closes), which can corrupt the
//! database. So the functions are looked up with `dlsym` in the library Python's
//! `sqlite3` module already uses (its `_sqlite3` extension module: a lookup through
//! that handle also searches the libraries it depends on, so a dynamically linked
//! `libsqlite3` is found as well as one linked in with exported symbols).
//!
//! Every `unsafe` block of edgesync-core's SQLite use is in this module; the types it
//! hands out ([`Connection`], [`Rows`], [`Row`]) are safe to use.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;
use std::ptr;
use std::sync::Arc;

use crate::rowjson::Value;
use crate::CoreError;

/// Result codes and fundamental types of the C API (stable since SQLite 3.0).
pub const SQLITE_OK: c_int = 0;
pub const SQLITE_NOMEM: c_int = 7;
pub const SQLITE_ROW: c_int = 100;
pub const SQLITE_DONE: c_int = 101;
pub const SQLITE_INTEGER: c_int = 1;
pub const SQLITE_FLOAT: c_int = 2;
pub const SQLITE_TEXT: c_int = 3;
pub const SQLITE_BLOB: c_int = 4;
pub const SQLITE_NULL: c_int = 5;

const SQLITE_OPEN_READONLY: c_int = 0x0000_0001;
/// Multi-thread mode for this connection: no mutex, used by one thread at a time
/// (guaranteed here by `&mut self` on every use of a [`Connection`]).
const SQLITE_OPEN_NOMUTEX: c_int = 0x0000_8000;
/// `SQLITE_TRANSIENT`: SQLite copies a bound value before `bind_*` returns. Passed as
/// an integer: the C type is a function pointer, whose ABI is the same as a pointer-
/// sized integer's, and Rust cannot hold an invalid function pointer value.
const SQLITE_TRANSIENT: isize = -1;

/// Statements a connection keeps prepared; past this the cache starts over (tables
/// come and go with schema changes, their SQL with them).
const STATEMENT_CACHE: usize = 64;

#[repr(C)]
struct Sqlite3 {
    _opaque: [u8; 0],
}

#[repr(C)]
struct Sqlite3Stmt {
    _opaque: [u8; 0],
}

type OpenV2 = unsafe extern "C" fn(*const c_char, *mut *mut Sqlite3, c_int, *const c_char) -> c_int;
type CloseV2 = unsafe extern "C" fn(*mut Sqlite3) -> c_int;
type BusyTimeout = unsafe extern "C" fn(*mut Sqlite3, c_int) -> c_int;
type PrepareV2 = unsafe extern "C" fn(
    *mut Sqlite3,
    *const c_char,
    c_int,
    *mut *mut Sqlite3Stmt,
    *mut *const c_char,
) -> c_int;
type StmtFn = unsafe extern "C" fn(*mut Sqlite3Stmt) -> c_int;
type BindText = unsafe extern "C" fn(*mut Sqlite3Stmt, c_int, *const c_char, c_int, isize) -> c_int;
type BindInt64 = unsafe extern "C" fn(*mut Sqlite3Stmt, c_int, i64) -> c_int;
type ColumnInt = unsafe extern "C" fn(*mut Sqlite3Stmt, c_int) -> c_int;
type ColumnInt64 = unsafe extern "C" fn(*mut Sqlite3Stmt, c_int) -> i64;
type ColumnDouble = unsafe extern "C" fn(*mut Sqlite3Stmt, c_int) -> f64;
type ColumnPtr = unsafe extern "C" fn(*mut Sqlite3Stmt, c_int) -> *const c_void;
type DbText = unsafe extern "C" fn(*mut Sqlite3) -> *const c_char;
type DbInt = unsafe extern "C" fn(*mut Sqlite3) -> c_int;
type Errstr = unsafe extern "C" fn(c_int) -> *const c_char;
type NoArgInt = unsafe extern "C" fn() -> c_int;

/// The functions used, copied out of the library (valid while `_lib` is loaded).
struct Fns {
    open_v2: OpenV2,
    close_v2: CloseV2,
    busy_timeout: BusyTimeout,
    prepare_v2: PrepareV2,
    finalize: StmtFn,
    reset: StmtFn,
    clear_bindings: StmtFn,
    step: StmtFn,
    column_count: StmtFn,
    bind_text: BindText,
    bind_int64: BindInt64,
    column_type: ColumnInt,
    column_int64: ColumnInt64,
    column_double: ColumnDouble,
    column_text: ColumnPtr,
    column_blob: ColumnPtr,
    column_bytes: ColumnInt,
    errmsg: DbText,
    extended_errcode: DbInt,
    errstr: Errstr,
    threadsafe: NoArgInt,
    libversion_number: NoArgInt,
}

/// The SQLite C API of one loaded library.
pub struct Api {
    fns: Fns,
    // Keeps the library mapped (and the function pointers in `fns` valid). For a
    // library the process had loaded already this only holds a reference count.
    _lib: libloading::Library,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("libversion_number", &self.libversion_number())
            .finish()
    }
}

fn unavailable(msg: impl Into<String>) -> CoreError {
    CoreError::Sqlite {
        code: None,
        message: msg.into(),
    }
}

impl Api {
    /// The API of the SQLite reachable through the library at `path`; `None` searches
    /// the program and the libraries it loaded globally (for a Python whose `_sqlite3`
    /// module is built in).
    ///
    /// Meant for a library that is already loaded: loading one here would run its
    /// initialisers, and a SQLite that is not the one Python uses must not be used.
    pub fn load(path: Option<&Path>) -> Result<Arc<Api>, CoreError> {
        let lib = match path {
            // SAFETY: loading runs the library's initialisers; the callers pass an
            // already-loaded module (Python's `_sqlite3`) or a system libsqlite3,
            // whose initialisers are safe to run.
            Some(p) => unsafe { libloading::Library::new(p) },
            None => this_program(),
        }
        .map_err(|e| unavailable(format!("cannot open the SQLite library: {e}")))?;
        macro_rules! sym {
            ($name:literal) => {{
                // SAFETY: each symbol is looked up with the C signature that SQLite
                // documents for it (the type of the `Fns` field it is stored in);
                // the pointer copied out stays valid while `lib` is kept in `Api`.
                let s = unsafe { lib.get(concat!($name, "\0").as_bytes()) };
                *s.map_err(|e| unavailable(format!("SQLite function {} not found: {e}", $name)))?
            }};
        }
        let fns = Fns {
            open_v2: sym!("sqlite3_open_v2"),
            close_v2: sym!("sqlite3_close_v2"),
            busy_timeout: sym!("sqlite3_busy_timeout"),
            prepare_v2: sym!("sqlite3_prepare_v2"),
            finalize: sym!("sqlite3_finalize"),
            reset: sym!("sqlite3_reset"),
            clear_bindings: sym!("sqlite3_clear_bindings"),
            step: sym!("sqlite3_step"),
            column_count: sym!("sqlite3_column_count"),
            bind_text: sym!("sqlite3_bind_text"),
            bind_int64: sym!("sqlite3_bind_int64"),
            column_type: sym!("sqlite3_column_type"),
            column_int64: sym!("sqlite3_column_int64"),
            column_double: sym!("sqlite3_column_double"),
            column_text: sym!("sqlite3_column_text"),
            column_blob: sym!("sqlite3_column_blob"),
            column_bytes: sym!("sqlite3_column_bytes"),
            errmsg: sym!("sqlite3_errmsg"),
            extended_errcode: sym!("sqlite3_extended_errcode"),
            errstr: sym!("sqlite3_errstr"),
            threadsafe: sym!("sqlite3_threadsafe"),
            libversion_number: sym!("sqlite3_libversion_number"),
        };
        let api = Api { fns, _lib: lib };
        // SAFETY: a function without arguments or preconditions.
        if unsafe { (api.fns.threadsafe)() } == 0 {
            // Built without any mutexes: our connection, used while the GIL is
            // released, could race with Python's on SQLite's global state.
            return Err(unavailable(
                "SQLite was built single-threaded (SQLITE_THREADSAFE=0)",
            ));
        }
        Ok(Arc::new(api))
    }

    /// `sqlite3_libversion_number()`, e.g. 3040001.
    pub fn libversion_number(&self) -> i32 {
        // SAFETY: a function without arguments or preconditions.
        unsafe { (self.fns.libversion_number)() }
    }

    fn errstr(&self, code: c_int) -> String {
        // SAFETY: sqlite3_errstr accepts any code and returns a static string.
        let p = unsafe { (self.fns.errstr)(code) };
        if p.is_null() {
            return format!("SQLite error {code}");
        }
        // SAFETY: a NUL-terminated static string owned by SQLite.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

#[cfg(unix)]
fn this_program() -> Result<libloading::Library, libloading::Error> {
    Ok(libloading::os::unix::Library::this().into())
}

#[cfg(windows)]
fn this_program() -> Result<libloading::Library, libloading::Error> {
    libloading::os::windows::Library::this().map(Into::into)
}

/// A database handle, closed on drop.
struct Db {
    api: Arc<Api>,
    raw: *mut Sqlite3,
}

impl Db {
    /// The error SQLite recorded on this connection for a call that returned `rc`.
    fn error(&self, rc: c_int, context: &str) -> CoreError {
        // SAFETY: `raw` is an open connection (closed only in Drop); errmsg returns a
        // NUL-terminated string valid until the next call on the connection, copied
        // here at once.
        let (code, msg) = unsafe {
            let code = (self.api.fns.extended_errcode)(self.raw);
            let p = (self.api.fns.errmsg)(self.raw);
            let msg = if p.is_null() {
                self.api.errstr(rc)
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            };
            (code, msg)
        };
        // The connection's code can be stale for calls that do not set it: trust rc.
        let code = if code & 0xff == rc & 0xff { code } else { rc };
        CoreError::Sqlite {
            code: Some(code),
            message: format!("{context}: {msg}"),
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        // SAFETY: `raw` came from sqlite3_open_v2 and is closed once, here. Every
        // statement of the connection is finalized before (Connection drops its
        // statements first); close_v2 would defer the close otherwise.
        unsafe { (self.api.fns.close_v2)(self.raw) };
    }
}

/// A prepared statement, finalized on drop. Owned by its [`Connection`].
struct Statement {
    api: Arc<Api>,
    raw: *mut Sqlite3Stmt,
    columns: usize,
}

impl Drop for Statement {
    fn drop(&mut self) {
        // SAFETY: `raw` came from sqlite3_prepare_v2 on a connection still open (the
        // statement cache is dropped before the connection), finalized once, here.
        unsafe { (self.api.fns.finalize)(self.raw) };
    }
}

/// A read-only connection of the SQLite library of an [`Api`], with a cache of
/// prepared statements.
pub struct Connection {
    // Declared before `db`: fields drop in order, so statements are finalized first.
    statements: HashMap<String, Statement>,
    db: Db,
}

// SAFETY: the connection is opened with SQLITE_OPEN_NOMUTEX ("multi-thread" mode),
// which allows using it, and its statements, from any thread as long as no two threads
// use them at once. Every use needs `&mut Connection` (or a borrow derived from one),
// so a Connection is used by one thread at a time; it is deliberately not Sync.
// `Api::load` refuses a library built with SQLITE_THREADSAFE=0.
unsafe impl Send for Connection {}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("statements", &self.statements.len())
            .finish()
    }
}

impl Connection {
    /// Opens `path` read-only, waiting up to `busy_timeout_ms` on a locked database.
    pub fn open_readonly(
        api: &Arc<Api>,
        path: &Path,
        busy_timeout_ms: i32,
    ) -> Result<Connection, CoreError> {
        Connection::open(api, path, SQLITE_OPEN_READONLY, busy_timeout_ms)
    }

    /// Opens (creating) `path` for writing: only tests write, to make databases.
    #[cfg(test)]
    pub(crate) fn open_writable(api: &Arc<Api>, path: &Path) -> Result<Connection, CoreError> {
        const SQLITE_OPEN_READWRITE: c_int = 0x0000_0002;
        const SQLITE_OPEN_CREATE: c_int = 0x0000_0004;
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
        Connection::open(api, path, flags, 5000)
    }

    fn open(
        api: &Arc<Api>,
        path: &Path,
        flags: c_int,
        busy_timeout_ms: i32,
    ) -> Result<Connection, CoreError> {
        let name = path
            .to_str()
            .ok_or_else(|| unavailable(format!("database path is not UTF-8: {path:?}")))?;
        let c_name = CString::new(name)
            .map_err(|_| unavailable(format!("database path contains NUL: {name:?}")))?;
        let mut raw: *mut Sqlite3 = ptr::null_mut();
        // SAFETY: `c_name` is NUL-terminated and outlives the call; `raw` is written by
        // SQLite; a null VFS name selects the default VFS (the one Python's uses).
        let rc = unsafe {
            (api.fns.open_v2)(
                c_name.as_ptr(),
                &mut raw,
                flags | SQLITE_OPEN_NOMUTEX,
                ptr::null(),
            )
        };
        if raw.is_null() {
            return Err(CoreError::Sqlite {
                code: Some(rc),
                message: format!("cannot open {name:?}: {}", api.errstr(rc)),
            });
        }
        // From here on a handle exists (even on failure) and Db closes it.
        let db = Db {
            api: Arc::clone(api),
            raw,
        };
        if rc != SQLITE_OK {
            return Err(db.error(rc, &format!("cannot open {name:?}")));
        }
        // SAFETY: `raw` is an open connection.
        let rc = unsafe { (api.fns.busy_timeout)(db.raw, busy_timeout_ms.max(0)) };
        if rc != SQLITE_OK {
            return Err(db.error(rc, "busy timeout"));
        }
        Ok(Connection {
            statements: HashMap::new(),
            db,
        })
    }

    /// The API this connection uses.
    pub fn api(&self) -> &Arc<Api> {
        &self.db.api
    }

    /// Runs the (cached) statement `sql` with `params` bound to `?1..`; the rows are
    /// read from the returned [`Rows`], which resets the statement when dropped.
    pub fn query(&mut self, sql: &str, params: &[Param<'_>]) -> Result<Rows<'_>, CoreError> {
        if !self.statements.contains_key(sql) {
            let stmt = self.prepare(sql)?;
            if self.statements.len() >= STATEMENT_CACHE {
                self.statements.clear();
            }
            self.statements.insert(sql.to_owned(), stmt);
        }
        let db = &self.db;
        let stmt = self
            .statements
            .get_mut(sql)
            .expect("statement inserted above");
        let rows = Rows { db, stmt };
        rows.bind(params)?;
        Ok(rows)
    }

    fn prepare(&self, sql: &str) -> Result<Statement, CoreError> {
        let len =
            c_int::try_from(sql.len()).map_err(|_| unavailable("SQL text longer than 2 GiB"))?;
        let mut raw: *mut Sqlite3Stmt = ptr::null_mut();
        let fns = &self.db.api.fns;
        // SAFETY: `sql` is valid for `len` bytes (no NUL terminator is needed when the
        // length is given); `raw` is written by SQLite.
        let rc = unsafe {
            (fns.prepare_v2)(
                self.db.raw,
                sql.as_ptr().cast(),
                len,
                &mut raw,
                ptr::null_mut(),
            )
        };
        if rc != SQLITE_OK {
            return Err(self.db.error(rc, "prepare"));
        }
        if raw.is_null() {
            return Err(unavailable("empty SQL statement"));
        }
        let mut stmt = Statement {
            api: Arc::clone(&self.db.api),
            raw,
            columns: 0,
        };
        // SAFETY: `raw` is a prepared statement of this connection.
        let n = unsafe { (fns.column_count)(stmt.raw) };
        stmt.columns = usize::try_from(n).unwrap_or(0);
        Ok(stmt)
    }
}

/// A parameter value to bind.
#[derive(Debug, Clone, Copy)]
pub enum Param<'a> {
    Integer(i64),
    Text(&'a str),
}

/// The rows of one running statement; the statement is reset (its read transaction
/// ended, its bindings cleared) when this is dropped.
pub struct Rows<'c> {
    db: &'c Db,
    stmt: &'c mut Statement,
}

impl Rows<'_> {
    fn bind(&self, params: &[Param<'_>]) -> Result<(), CoreError> {
        let fns = &self.db.api.fns;
        for (i, p) in params.iter().enumerate() {
            let idx = c_int::try_from(i + 1).map_err(|_| unavailable("too many parameters"))?;
            // SAFETY: `stmt.raw` is a prepared statement, reset (by the previous Rows'
            // drop) so it may be bound; SQLITE_TRANSIENT makes SQLite copy the text,
            // which is valid for `len` bytes during the call.
            let rc = unsafe {
                match *p {
                    Param::Integer(v) => (fns.bind_int64)(self.stmt.raw, idx, v),
                    Param::Text(s) => {
                        let len = c_int::try_from(s.len())
                            .map_err(|_| unavailable("parameter longer than 2 GiB"))?;
                        (fns.bind_text)(
                            self.stmt.raw,
                            idx,
                            s.as_ptr().cast(),
                            len,
                            SQLITE_TRANSIENT,
                        )
                    }
                }
            };
            if rc != SQLITE_OK {
                return Err(self.db.error(rc, "bind"));
            }
        }
        Ok(())
    }

    /// How many columns each row has.
    pub fn column_count(&self) -> usize {
        self.stmt.columns
    }

    /// The next row, or None when there are no more.
    pub fn next_row(&mut self) -> Result<Option<Row<'_>>, CoreError> {
        // SAFETY: `stmt.raw` is a prepared, bound statement; no Row of the previous
        // step is alive (a Row borrows `self` mutably).
        let rc = unsafe { (self.db.api.fns.step)(self.stmt.raw) };
        match rc {
            SQLITE_ROW => Ok(Some(Row {
                db: self.db,
                stmt: self.stmt.raw,
                columns: self.stmt.columns,
                _rows: std::marker::PhantomData,
            })),
            SQLITE_DONE => Ok(None),
            _ => Err(self.db.error(rc, "step")),
        }
    }
}

impl Drop for Rows<'_> {
    fn drop(&mut self) {
        // SAFETY: `stmt.raw` is a prepared statement of an open connection. reset
        // returns the error of the last step again, already reported by next_row.
        unsafe {
            (self.db.api.fns.reset)(self.stmt.raw);
            (self.db.api.fns.clear_bindings)(self.stmt.raw);
        }
    }
}

/// The current row of a [`Rows`]; its values are valid until the next step.
pub struct Row<'r> {
    db: &'r Db,
    stmt: *mut Sqlite3Stmt,
    columns: usize,
    _rows: std::marker::PhantomData<&'r mut ()>,
}

impl Row<'_> {
    /// How many columns the row has.
    pub fn len(&self) -> usize {
        self.columns
    }

    /// Whether the row has no columns.
    pub fn is_empty(&self) -> bool {
        self.columns == 0
    }

    fn index(&self, i: usize) -> c_int {
        assert!(i < self.columns, "column {i} of {}", self.columns);
        // cannot fail: column_count returned an int
        c_int::try_from(i).expect("column index")
    }

    /// The fundamental type of column `i` (`SQLITE_INTEGER` … `SQLITE_NULL`).
    pub fn column_type(&self, i: usize) -> c_int {
        let i = self.index(i);
        // SAFETY: the statement has a current row (this Row exists) and `i` is in range.
        unsafe { (self.db.api.fns.column_type)(self.stmt, i) }
    }

    /// Column `i` as SQLite stores it; TEXT as its bytes, which SQLite does not
    /// promise are UTF-8 (it stores whatever the application bound).
    pub fn value(&self, i: usize) -> Result<RawValue<'_>, CoreError> {
        let ty = self.column_type(i);
        let i = self.index(i);
        let fns = &self.db.api.fns;
        // SAFETY: the statement has a current row and `i` is in range. The type is
        // taken first and each value read with the accessor of that type, so SQLite
        // converts nothing and the text/blob pointer stays valid until the next step
        // (the lifetime of `&self`, which borrows the Rows mutably). column_bytes is
        // called after column_text/column_blob, as the SQLite docs require.
        unsafe {
            Ok(match ty {
                SQLITE_INTEGER => RawValue::Integer((fns.column_int64)(self.stmt, i)),
                SQLITE_FLOAT => RawValue::Real((fns.column_double)(self.stmt, i)),
                SQLITE_TEXT | SQLITE_BLOB => {
                    let p = if ty == SQLITE_TEXT {
                        (fns.column_text)(self.stmt, i)
                    } else {
                        (fns.column_blob)(self.stmt, i)
                    };
                    let n = usize::try_from((fns.column_bytes)(self.stmt, i)).unwrap_or(0);
                    let bytes: &[u8] = if p.is_null() {
                        // NULL means empty, or out of memory: only then is an error set.
                        if n > 0 || (fns.extended_errcode)(self.db.raw) & 0xff == SQLITE_NOMEM {
                            return Err(CoreError::Sqlite {
                                code: Some(SQLITE_NOMEM),
                                message: "out of memory reading a column".into(),
                            });
                        }
                        &[]
                    } else {
                        std::slice::from_raw_parts(p.cast::<u8>(), n)
                    };
                    if ty == SQLITE_TEXT {
                        RawValue::Text(bytes)
                    } else {
                        RawValue::Blob(bytes)
                    }
                }
                _ => RawValue::Null,
            })
        }
    }
}

/// One column value as stored, borrowed from the current row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RawValue<'a> {
    Null,
    Integer(i64),
    Real(f64),
    /// TEXT bytes, normally UTF-8 but not guaranteed.
    Text(&'a [u8]),
    Blob(&'a [u8]),
}

impl<'a> RawValue<'a> {
    /// The row JSON value; `None` for TEXT that is not valid UTF-8 (see
    /// [`RawValue::lossy_text`]).
    pub fn as_value(&self) -> Option<Value<'a>> {
        Some(match *self {
            RawValue::Null => Value::Null,
            RawValue::Integer(i) => Value::Integer(i),
            RawValue::Real(f) => Value::Real(f),
            RawValue::Text(b) => Value::Text(std::str::from_utf8(b).ok()?),
            RawValue::Blob(b) => Value::Blob(b),
        })
    }

    /// TEXT with U+FFFD for each maximal invalid UTF-8 sequence, as Python's
    /// `bytes.decode("utf-8", "replace")` does; None for other types.
    pub fn lossy_text(&self) -> Option<String> {
        match *self {
            RawValue::Text(b) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }
}
