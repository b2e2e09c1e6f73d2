//! The one place where `CoreError` becomes a Python exception.
//!
//! The exception classes are imported from `edgesync.errors` (SQLite failures: from
//! Python's `sqlite3`, so callers handle them as they handle its own); this crate
//! defines no exception types of its own.

use edgesync_core::CoreError;
use pyo3::prelude::*;

pyo3::import_exception!(edgesync.errors, BatchRejected);
pyo3::import_exception!(edgesync.errors, SchemaError);
pyo3::import_exception!(edgesync.errors, BlobError);
pyo3::import_exception!(sqlite3, OperationalError);

/// `CoreError` → `BatchRejected(code, detail, field)`, `SchemaError(msg)`, `BlobError(msg)`
/// or `sqlite3.OperationalError(msg)` (with `sqlite_errorcode` when SQLite gave one).
pub fn to_pyerr(err: CoreError) -> PyErr {
    match err {
        CoreError::Rejected {
            code,
            field,
            detail,
        } => BatchRejected::new_err((code.as_str(), detail, field)),
        CoreError::Schema(msg) => SchemaError::new_err(msg),
        CoreError::Blob(msg) => BlobError::new_err(msg),
        CoreError::Sqlite { code, message } => {
            Python::attach(|py| {
                let e = OperationalError::new_err(message);
                if let Some(code) = code {
                    // as Python's sqlite3 sets it; a failure to set it loses only that
                    let _ = e.value(py).setattr("sqlite_errorcode", code);
                }
                e
            })
        }
    }
}

/// `.into_py_result()` on core results.
pub trait IntoPyResult<T> {
    fn into_py_result(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for Result<T, CoreError> {
    fn into_py_result(self) -> PyResult<T> {
        self.map_err(to_pyerr)
    }
}
