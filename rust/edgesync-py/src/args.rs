//! Argument conversions shared by the classes and functions of `_core`.

use std::ops::Deref;

use edgesync_core as core;
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;

use crate::errors::IntoPyResult;

/// Bytes of a `bytes`, `bytearray`, `memoryview` or other byte buffer argument.
/// `bytes` is borrowed without copying; other buffers are copied so the GIL
/// can be released safely while the bytes are read.
pub(crate) enum ByteArg {
    Backed(PyBackedBytes),
    Owned(Vec<u8>),
}

impl Deref for ByteArg {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            ByteArg::Backed(b) => b,
            ByteArg::Owned(v) => v,
        }
    }
}

pub(crate) fn byte_arg(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<ByteArg> {
    if let Ok(backed) = obj.extract::<PyBackedBytes>() {
        return Ok(ByteArg::Backed(backed));
    }
    match PyBuffer::<u8>::get(obj) {
        Ok(buf) => Ok(ByteArg::Owned(buf.to_vec(obj.py())?)),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{name} must be a bytes-like object, not {}",
            obj.get_type().name()?
        ))),
    }
}

/// `(column, pg_type)` pairs of a COPY call; SchemaError for an unknown type.
pub(crate) fn parse_columns(
    columns: Vec<(String, String)>,
) -> PyResult<Vec<(String, core::PgType)>> {
    columns
        .into_iter()
        .map(|(name, ty)| Ok((name, ty.parse::<core::PgType>()?)))
        .collect::<Result<Vec<_>, core::CoreError>>()
        .into_py_result()
}

/// ValueError unless `device_id` (when given) is a hyphenated UUID.
/// ValueError for row indices a batch does not have (``select``).
pub(crate) fn bad_rows(indices: &[usize]) -> PyErr {
    PyValueError::new_err(format!("no such rows in the batch: {indices:?}"))
}

pub(crate) fn check_device_id(device_id: Option<&str>) -> PyResult<()> {
    match device_id {
        Some(d) if !core::envelope::is_uuid(d) => Err(PyValueError::new_err(format!(
            "device_id must be a hyphenated UUID, got {d:?}"
        ))),
        _ => Ok(()),
    }
}
