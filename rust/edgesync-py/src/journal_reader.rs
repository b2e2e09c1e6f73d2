//! `JournalReader`: pages of journal rows read and encoded by Rust straight from the
//! application's SQLite file, through the SQLite library Python's `sqlite3` uses (see
//! `edgesync_core::sqlite_api` for why it must be that one).

use std::path::PathBuf;
use std::sync::Mutex;

use edgesync_core::journal_reader::{JournalQuery, JournalReader, Page};
use edgesync_core::sqlite_api::Api;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::errors::IntoPyResult;
use crate::row_encoder::{PyJournalRow, PyRowEncoder};

struct Open {
    reader: JournalReader,
    // Kept between reads so its buffers are reused; taken out during a read.
    page: Page,
}

/// A read-only connection to the application's database that builds journal pages.
#[pyclass(frozen, name = "JournalReader", module = "edgesync._core")]
pub struct PyJournalReader {
    // A Mutex because reads run without the GIL and the SQLite connection must not be
    // used by two threads at once; None once closed.
    state: Mutex<Option<Open>>,
    sqlite_version_number: i32,
}

fn closed() -> PyErr {
    PyValueError::new_err("the journal reader is closed")
}

impl PyJournalReader {
    /// Runs `f` on the open reader without the GIL.
    fn with_reader<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Open) -> PyResult<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
            f(guard.as_mut().ok_or_else(closed)?)
        })
    }
}

#[pymethods]
impl PyJournalReader {
    /// Opens ``path`` read-only with the SQLite found through ``library`` (the path of
    /// the loaded ``_sqlite3`` module; None: the running program). Raises
    /// ``sqlite3.OperationalError`` when SQLite or the database cannot be had.
    #[new]
    fn new(
        py: Python<'_>,
        library: Option<PathBuf>,
        path: PathBuf,
        busy_timeout_ms: i32,
    ) -> PyResult<Self> {
        let reader = py
            .detach(|| {
                let api = Api::load(library.as_deref())?;
                JournalReader::open(&api, &path, busy_timeout_ms)
            })
            .into_py_result()?;
        Ok(PyJournalReader {
            sqlite_version_number: reader.api().libversion_number(),
            state: Mutex::new(Some(Open {
                reader,
                page: Page::new(),
            })),
        })
    }

    /// ``sqlite3_libversion_number()`` of the library in use.
    #[getter]
    fn sqlite_version_number(&self) -> i32 {
        self.sqlite_version_number
    }

    /// The JournalRows of ``sql`` (``journal_query``'s SELECT) for ``table`` with
    /// ``after < commit_seq <= upto``, at most ``limit``, encoded by ``encoder``.
    #[allow(clippy::too_many_arguments)]
    fn read<'py>(
        &self,
        py: Python<'py>,
        sql: &str,
        encoder: &Bound<'py, PyRowEncoder>,
        table: &str,
        after: i64,
        upto: i64,
        limit: i64,
    ) -> PyResult<Bound<'py, PyList>> {
        let enc = encoder.get();
        let q = JournalQuery {
            sql,
            encoder: &enc.inner,
            live_index: enc.live_index,
        };
        let page = self.with_reader(py, |open| {
            let mut page = std::mem::take(&mut open.page);
            open.reader
                .read(q, table, after, upto, limit, &mut page)
                .into_py_result()?;
            Ok(page)
        })?;
        let items = page
            .iter()
            .map(|(commit_seq, encoded)| {
                Py::new(
                    py,
                    PyJournalRow {
                        commit_seq,
                        encoded: encoded.map(|b| PyBytes::new(py, b).unbind()),
                    },
                )
            })
            .collect::<PyResult<Vec<_>>>()?;
        // Hand the buffers back for the next read (unless another read runs now).
        if let Ok(mut guard) = self.state.try_lock() {
            if let Some(open) = guard.as_mut() {
                open.page = page;
            }
        }
        PyList::new(py, items)
    }

    /// Steps ``sql`` as ``read`` would and reads every value, writing no JSON: what
    /// SQLite alone costs (benchmarks). Returns (rows, last commit_seq or ``after``).
    fn scan(
        &self,
        py: Python<'_>,
        sql: &str,
        table: &str,
        after: i64,
        upto: i64,
        limit: i64,
    ) -> PyResult<(usize, i64)> {
        self.with_reader(py, |open| {
            open.reader
                .scan(sql, table, after, upto, limit)
                .into_py_result()
        })
    }

    /// Closes the connection; later reads raise ValueError. Closing twice is fine.
    fn close(&self, py: Python<'_>) {
        py.detach(|| {
            let taken = self.state.lock().unwrap_or_else(|e| e.into_inner()).take();
            drop(taken); // sqlite3_close_v2, outside the lock
        });
    }
}
