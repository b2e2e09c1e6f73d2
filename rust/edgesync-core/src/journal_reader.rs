//! Journal rows read from the application's SQLite file and written as batch entries
//! in one pass, without a value object per row in between.
//!
//! The SQL is the agent's `journal_query` (parameters: table name, after, upto, limit);
//! each row is written by [`RowEncoder::encode_entry`], the same code that writes rows
//! fetched by Python's `sqlite3`, so both give byte-identical entries. TEXT that is not
//! UTF-8 is written with U+FFFD in place of each bad sequence, as Python's
//! `decode("utf-8", "replace")` does in the fallback path.
//!
//! The connection is read-only and its own (so reading never waits for the agent's
//! Python connection): it sees committed data only, which is all the journal holds.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use crate::rowjson::{EntrySource, RowEncoder, Value};
use crate::sqlite_api::{Api, Connection, Param, RawValue, Row, SQLITE_INTEGER, SQLITE_NULL};
use crate::CoreError;

/// One page of encoded entries: all JSON in one buffer, one slot per journal row.
#[derive(Debug, Default)]
pub struct Page {
    bytes: Vec<u8>,
    entries: Vec<(i64, Option<Range<usize>>)>,
}

impl Page {
    pub fn new() -> Page {
        Page::default()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.entries.clear();
    }

    /// `(commit_seq, entry JSON)` per journal row, oldest first; None when the row is
    /// gone.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (i64, Option<&[u8]>)> + '_ {
        self.entries
            .iter()
            .map(|(seq, r)| (*seq, r.as_ref().map(|r| &self.bytes[r.clone()])))
    }
}

/// What to run for one table: `journal_query`'s SQL and the encoder of its rows.
#[derive(Debug, Clone, Copy)]
pub struct JournalQuery<'a> {
    pub sql: &'a str,
    pub encoder: &'a RowEncoder,
    /// The column that is NULL exactly when an insert/update's row is gone.
    pub live_index: usize,
}

/// A read-only connection to the application's database that builds pages of entries.
#[derive(Debug)]
pub struct JournalReader {
    conn: Connection,
}

fn shape_error(message: String) -> CoreError {
    CoreError::Sqlite {
        code: None,
        message,
    }
}

struct SqliteRow<'a, 'r>(&'a Row<'r>);

impl EntrySource for SqliteRow<'_, '_> {
    type Error = CoreError;

    fn commit_seq(&self) -> Result<i64, CoreError> {
        match self.0.value(0)? {
            RawValue::Integer(i) => Ok(i),
            v => Err(shape_error(format!(
                "journal commit_seq is not an integer: {v:?}"
            ))),
        }
    }

    fn with_op<R>(&self, f: impl FnOnce(&str) -> R) -> Result<R, CoreError> {
        match self.0.value(1)?.as_value() {
            Some(Value::Text(op)) => Ok(f(op)),
            v => Err(shape_error(format!("journal op is not text: {v:?}"))),
        }
    }

    fn is_null(&self, i: usize) -> Result<bool, CoreError> {
        Ok(self.0.column_type(i) == SQLITE_NULL)
    }

    fn with_value<R>(&self, i: usize, f: impl FnOnce(Value<'_>) -> R) -> Result<R, CoreError> {
        let raw = self.0.value(i)?;
        Ok(match raw.as_value() {
            Some(v) => f(v),
            // TEXT that is not UTF-8: rare, so only then a copy
            None => f(Value::Text(&raw.lossy_text().unwrap_or_default())),
        })
    }
}

impl JournalReader {
    /// Opens the database at `path` read-only through the SQLite library of `api`.
    pub fn open(
        api: &Arc<Api>,
        path: &Path,
        busy_timeout_ms: i32,
    ) -> Result<JournalReader, CoreError> {
        Ok(JournalReader {
            conn: Connection::open_readonly(api, path, busy_timeout_ms)?,
        })
    }

    /// The SQLite library in use.
    pub fn api(&self) -> &Arc<Api> {
        self.conn.api()
    }

    /// Replaces `page` with the entries of the journal rows of `table` with
    /// `after < commit_seq <= upto`, at most `limit`, oldest first.
    pub fn read(
        &mut self,
        q: JournalQuery<'_>,
        table: &str,
        after: i64,
        upto: i64,
        limit: i64,
        page: &mut Page,
    ) -> Result<(), CoreError> {
        page.clear();
        let params = [
            Param::Text(table),
            Param::Integer(after),
            Param::Integer(upto),
            Param::Integer(limit),
        ];
        let mut rows = self.conn.query(q.sql, &params)?;
        let width = q.encoder.entry_width(q.live_index);
        if rows.column_count() < width {
            return Err(shape_error(format!(
                "journal query returns {} columns, needs {width}",
                rows.column_count()
            )));
        }
        while let Some(row) = rows.next_row()? {
            let start = page.bytes.len();
            let src = SqliteRow(&row);
            let commit_seq = src.commit_seq()?;
            let live = q
                .encoder
                .encode_entry(&mut page.bytes, q.live_index, &src)?;
            page.entries
                .push((commit_seq, live.then_some(start..page.bytes.len())));
        }
        Ok(())
    }

    /// Steps the same query and reads every value without writing JSON: the cost of
    /// SQLite alone, to compare [`JournalReader::read`] with. Returns the row count.
    pub fn scan(
        &mut self,
        sql: &str,
        table: &str,
        after: i64,
        upto: i64,
        limit: i64,
    ) -> Result<(usize, i64), CoreError> {
        let params = [
            Param::Text(table),
            Param::Integer(after),
            Param::Integer(upto),
            Param::Integer(limit),
        ];
        let mut rows = self.conn.query(sql, &params)?;
        let (mut n, mut last) = (0, after);
        let mut sink = 0usize;
        while let Some(row) = rows.next_row()? {
            for i in 0..row.len() {
                sink = sink.wrapping_add(match row.value(i)? {
                    RawValue::Text(b) | RawValue::Blob(b) => b.len(),
                    _ => 1,
                });
            }
            if row.column_type(0) == SQLITE_INTEGER {
                if let RawValue::Integer(seq) = row.value(0)? {
                    last = seq;
                }
            }
            n += 1;
        }
        std::hint::black_box(sink);
        Ok((n, last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite_api::Api;
    use crate::sqlite_api::Connection;
    use std::path::PathBuf;

    /// The system libsqlite3, which these tests require (CI installs it).
    fn api() -> Arc<Api> {
        let candidates = [
            "libsqlite3.so.0",
            "/lib/x86_64-linux-gnu/libsqlite3.so.0",
            "/usr/lib/x86_64-linux-gnu/libsqlite3.so.0",
            "/usr/lib/aarch64-linux-gnu/libsqlite3.so.0",
            "libsqlite3.dylib",
        ];
        for c in candidates {
            if let Ok(api) = Api::load(Some(Path::new(c))) {
                return api;
            }
        }
        panic!("no libsqlite3 found (install libsqlite3-0): tried {candidates:?}");
    }

    fn temp_db(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "edgesync-journal-reader-{}-{name}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("app.db");
        let _ = std::fs::remove_file(&path);
        path
    }

    /// Runs each statement of `script` on a writable connection of `path`.
    fn exec(path: &Path, script: &[&str]) {
        let mut conn = Connection::open_writable(&api(), path).unwrap();
        for sql in script {
            let mut rows = conn.query(sql, &[]).unwrap();
            while rows.next_row().unwrap().is_some() {}
        }
    }

    const JOURNAL_SQL: &str = "SELECT j.seq, j.op, j.k0, t.id, t.v, t.id FROM j \
        LEFT JOIN t ON j.op != 'delete' AND t.id IS j.k0 \
        WHERE j.tname = ? AND j.seq > ? AND j.seq <= ? ORDER BY j.seq LIMIT ?";

    fn setup(name: &str) -> PathBuf {
        let path = temp_db(name);
        exec(
            &path,
            &[
                "PRAGMA journal_mode=WAL",
                "CREATE TABLE t (id INTEGER PRIMARY KEY, v)",
                "CREATE TABLE j (seq INTEGER PRIMARY KEY, tname TEXT, op TEXT, k0)",
                "INSERT INTO t VALUES (1, 'a\"b'), (2, 2.5), (3, x'00ff'), (4, NULL), \
                 (5, CAST(x'61ff62' AS TEXT)), (6, 9223372036854775807)",
                "INSERT INTO j (tname, op, k0) VALUES ('t','insert',1), ('t','insert',2), \
                 ('t','insert',3), ('t','insert',4), ('t','insert',5), ('t','insert',6), \
                 ('t','insert',7), ('t','delete',7), ('u','insert',1)",
            ],
        );
        path
    }

    fn entries(page: &Page) -> Vec<(i64, Option<String>)> {
        page.iter()
            .map(|(s, e)| (s, e.map(|e| String::from_utf8(e.to_vec()).unwrap())))
            .collect()
    }

    #[test]
    fn reads_and_encodes_every_value_kind() {
        let path = setup("kinds");
        let api = api();
        assert!(api.libversion_number() >= 3_007_000);
        let mut reader = JournalReader::open(&api, &path, 1000).unwrap();
        let enc = RowEncoder::new(&["id"], &["id", "v"]);
        let q = JournalQuery {
            sql: JOURNAL_SQL,
            encoder: &enc,
            live_index: 5,
        };
        let mut page = Page::new();
        reader.read(q, "t", 0, i64::MAX, 100, &mut page).unwrap();
        let e = |seq: i64, op: &str, id: &str, v: &str| {
            Some(format!(
                "{{\"commit_seq\":{seq},\"op\":\"{op}\",\"pk\":{{\"id\":{id}}},\"row\":{v}}}"
            ))
        };
        assert_eq!(
            entries(&page),
            vec![
                (1, e(1, "insert", "1", r#"{"id":1,"v":"a\"b"}"#)),
                (2, e(2, "insert", "2", r#"{"id":2,"v":2.5}"#)),
                (3, e(3, "insert", "3", r#"{"id":3,"v":{"$blob":"00FF"}}"#)),
                (4, e(4, "insert", "4", r#"{"id":4,"v":null}"#)),
                (5, e(5, "insert", "5", "{\"id\":5,\"v\":\"a\u{fffd}b\"}")),
                (
                    6,
                    e(6, "insert", "6", r#"{"id":6,"v":9223372036854775807}"#)
                ),
                (7, None),
                (8, e(8, "delete", "7", "null")),
            ]
        );
        // the cached statement again, with other bounds
        reader.read(q, "t", 2, 3, 100, &mut page).unwrap();
        assert_eq!(entries(&page).len(), 1);
        reader.read(q, "t", 0, i64::MAX, 2, &mut page).unwrap();
        assert_eq!(page.len(), 2);
        reader.read(q, "u", 0, i64::MAX, 10, &mut page).unwrap();
        assert_eq!(
            entries(&page),
            vec![(9, e(9, "insert", "1", r#"{"id":1,"v":"a\"b"}"#))]
        );
        assert_eq!(
            reader.scan(JOURNAL_SQL, "t", 0, i64::MAX, 100).unwrap(),
            (8, 8)
        );
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn sees_new_commits_and_reports_errors() {
        let path = setup("errors");
        let api = api();
        let mut reader = JournalReader::open(&api, &path, 1000).unwrap();
        let enc = RowEncoder::new(&["id"], &["id", "v"]);
        let q = JournalQuery {
            sql: JOURNAL_SQL,
            encoder: &enc,
            live_index: 5,
        };
        let mut page = Page::new();
        reader.read(q, "t", 0, i64::MAX, 100, &mut page).unwrap();
        assert_eq!(page.len(), 8);
        // no read transaction is left open between reads: a commit is seen at once
        exec(
            &path,
            &["INSERT INTO j (tname, op, k0) VALUES ('t','delete',1)"],
        );
        reader.read(q, "t", 8, i64::MAX, 100, &mut page).unwrap();
        assert_eq!(page.len(), 1);
        // a writer's open transaction neither blocks the reader (WAL) nor shows
        let mut writer = Connection::open_writable(&api, &path).unwrap();
        for sql in [
            "BEGIN IMMEDIATE",
            "INSERT INTO j (tname, op, k0) VALUES ('t','x',1)",
        ] {
            let mut rows = writer.query(sql, &[]).unwrap();
            while rows.next_row().unwrap().is_some() {}
        }
        reader.read(q, "t", 0, i64::MAX, 100, &mut page).unwrap();
        assert_eq!(page.len(), 9);
        drop(writer); // closing rolls the transaction back

        let err = reader
            .read(
                JournalQuery {
                    sql: "SELECT nope FROM j",
                    ..q
                },
                "t",
                0,
                1,
                1,
                &mut page,
            )
            .unwrap_err();
        assert!(
            matches!(&err, CoreError::Sqlite { code: Some(1), message } if message.contains("nope")),
            "{err:?}"
        );
        let narrow = "SELECT seq, op FROM j WHERE tname = ? AND seq > ? AND seq <= ? LIMIT ?";
        let err = reader
            .read(JournalQuery { sql: narrow, ..q }, "t", 0, 9, 9, &mut page)
            .unwrap_err();
        assert!(err.to_string().contains("needs 6"), "{err}");
        // read-only: a write is refused by SQLite, not carried out
        let write = "INSERT INTO j (tname, op, k0) VALUES (?, 'x', ?) RETURNING seq, ?, ?";
        assert!(reader.scan(write, "t", 1, 2, 3).is_err());

        let missing = JournalReader::open(&api, &path.with_file_name("none.db"), 10);
        assert!(matches!(
            missing,
            Err(CoreError::Sqlite { code: Some(14), .. })
        ));
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn missing_symbols_are_reported() {
        let err = Api::load(Some(Path::new("libm.so.6"))).unwrap_err();
        assert!(
            matches!(&err, CoreError::Sqlite { code: None, message } if message.contains("sqlite3_")),
            "{err:?}"
        );
        let err = Api::load(Some(Path::new("/nonexistent/libsqlite3.so"))).unwrap_err();
        assert!(matches!(err, CoreError::Sqlite { code: None, .. }));
    }
}
