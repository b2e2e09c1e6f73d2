//! The one place where `CoreError` becomes a Python exception.
//!
//! The exception classes are imported from `edgesync.errors`; this crate
//! defines no exception types of its own.

use edgesync_core::CoreError;
use pyo3::prelude::*;

pyo3::import_exception!(edgesync.errors, BatchRejected);
pyo3::import_exception!(edgesync.errors, SchemaError);
pyo3::import_exception!(edgesync.errors, BlobError);

/// `CoreError` → `BatchRejected(code, detail, field)`, `SchemaError(msg)` or `BlobError(msg)`.
pub fn to_pyerr(err: CoreError) -> PyErr {
    match err {
        CoreError::Rejected {
            code,
            field,
            detail,
        } => BatchRejected::new_err((code, detail, field)),
        CoreError::Schema(msg) => SchemaError::new_err(msg),
        CoreError::Blob(msg) => BlobError::new_err(msg),
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
