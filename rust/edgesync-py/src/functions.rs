//! The module-level functions of `_core`: affinity, fingerprints, pk hashes, blobs.

use edgesync_core as core;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::args::byte_arg;
use crate::errors::IntoPyResult;

/// SQLite column affinity (INTEGER, TEXT, BLOB, REAL, NUMERIC) of a declared type.
#[pyfunction]
pub(crate) fn sqlite_affinity(declared_type: &str) -> &'static str {
    core::sqlite_affinity(declared_type).as_str()
}

/// Fingerprint of a table: ``(schema_hash, canonical_json)``.
#[pyfunction]
pub(crate) fn schema_fingerprint(
    table_name: &str,
    columns: Vec<(String, String, i64, bool)>,
) -> PyResult<(String, String)> {
    let specs: Vec<core::ColumnSpec> = columns
        .into_iter()
        .map(
            |(name, declared_type, pk_ordinal, not_null)| core::ColumnSpec {
                name,
                declared_type,
                pk_ordinal,
                not_null,
            },
        )
        .collect();
    let fp = core::schema_fingerprint(table_name, &specs).into_py_result()?;
    Ok((fp.schema_hash, fp.canonical_json))
}

/// ``source_pk_hash``: SHA-256 hex of the canonical form of a ``pk`` JSON object.
#[pyfunction]
pub(crate) fn pk_hash(pk_json: &Bound<'_, PyAny>) -> PyResult<String> {
    let data = byte_arg(pk_json, "pk_json")?;
    core::pk_hash_json(&data).into_py_result()
}

/// zstd frame (with content size) of ``data``; releases the GIL.
#[pyfunction]
#[pyo3(signature = (data, level = 3))]
pub(crate) fn compress_blob<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    level: i32,
) -> PyResult<Bound<'py, PyBytes>> {
    let data = byte_arg(data, "data")?;
    let out = py
        .detach(|| core::compress_blob(&data, level))
        .into_py_result()?;
    Ok(PyBytes::new(py, &out))
}

/// Inverse of compress_blob; BlobError if corrupt or larger than ``max_size``.
#[pyfunction]
#[pyo3(signature = (data, max_size = 1 << 31))]
pub(crate) fn decompress_blob<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    max_size: u64,
) -> PyResult<Bound<'py, PyBytes>> {
    let data = byte_arg(data, "data")?;
    let out = py
        .detach(|| core::decompress_blob(&data, max_size))
        .into_py_result()?;
    Ok(PyBytes::new(py, &out))
}

/// The JSON of a compressed batch (one zstd frame), inflated with the GIL released and
/// bounded by ``max_payload_bytes`` (the MQTT batch limit by default); raises
/// BatchRejected ``payload_too_large`` or ``malformed_json``.
#[pyfunction]
#[pyo3(signature = (payload, max_payload_bytes = None))]
pub(crate) fn inflate_batch<'py>(
    py: Python<'py>,
    payload: &Bound<'py, PyAny>,
    max_payload_bytes: Option<usize>,
) -> PyResult<Bound<'py, PyBytes>> {
    let payload = byte_arg(payload, "payload")?;
    let limit = max_payload_bytes.unwrap_or(core::MAX_BATCH_BYTES);
    let out = py
        .detach(|| core::inflate_batch(&payload, limit))
        .into_py_result()?;
    Ok(PyBytes::new(py, &out))
}
