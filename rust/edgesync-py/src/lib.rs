//! `edgesync._core`: thin PyO3 bindings over `edgesync-core`.
//!
//! Heavy calls release the GIL. Every error goes through [`errors::to_pyerr`].

mod errors;
mod journal_reader;

use std::ops::Deref;

use edgesync_core as core;
use edgesync_core::rowjson::EntrySource;
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyFloat, PyInt, PyList, PyString, PyTuple};

use errors::IntoPyResult;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Bytes of a `bytes`, `bytearray`, `memoryview` or other byte buffer argument.
/// `bytes` is borrowed without copying; other buffers are copied so the GIL
/// can be released safely while the bytes are read.
enum ByteArg {
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

fn byte_arg(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<ByteArg> {
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

/// SQLite column affinity (INTEGER, TEXT, BLOB, REAL, NUMERIC) of a declared type.
#[pyfunction]
fn sqlite_affinity(declared_type: &str) -> &'static str {
    core::sqlite_affinity(declared_type).as_str()
}

/// Fingerprint of a table: ``(schema_hash, canonical_json)``.
#[pyfunction]
fn schema_fingerprint(
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
fn pk_hash(pk_json: &Bound<'_, PyAny>) -> PyResult<String> {
    let data = byte_arg(pk_json, "pk_json")?;
    core::pk_hash_json(&data).into_py_result()
}

/// zstd frame (with content size) of ``data``; releases the GIL.
#[pyfunction]
#[pyo3(signature = (data, level = 3))]
fn compress_blob<'py>(
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
fn decompress_blob<'py>(
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

/// A validated ``sync/rows/batch`` payload, kept in Rust memory.
#[pyclass(frozen, name = "RowBatch", module = "edgesync._core")]
struct PyRowBatch {
    inner: core::RowBatch,
}

#[pymethods]
impl PyRowBatch {
    #[getter]
    fn format_version(&self) -> i64 {
        self.inner.format_version
    }

    #[getter]
    fn capture_strategy(&self) -> &str {
        &self.inner.capture_strategy
    }

    #[getter]
    fn batch_id(&self) -> &str {
        &self.inner.batch_id
    }

    #[getter]
    fn journal_epoch(&self) -> &str {
        &self.inner.journal_epoch
    }

    #[getter]
    fn source_table(&self) -> &str {
        &self.inner.source_table
    }

    #[getter]
    fn schema_hash(&self) -> &str {
        &self.inner.schema_hash
    }

    /// The ``schema_columns`` object re-serialized canonically, when present.
    #[getter]
    fn schema_columns_json<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.inner
            .schema_columns_json
            .as_ref()
            .map(|s| PyBytes::new(py, s.as_bytes()))
    }

    #[getter]
    fn first_commit_seq(&self) -> i64 {
        self.inner.first_commit_seq
    }

    #[getter]
    fn last_commit_seq(&self) -> i64 {
        self.inner.last_commit_seq
    }

    #[getter]
    fn row_count(&self) -> usize {
        self.inner.row_count()
    }

    #[getter]
    fn payload_size(&self) -> usize {
        self.inner.payload_size
    }

    /// True when no two row ops share a primary key.
    #[getter]
    fn keys_are_unique(&self) -> bool {
        self.inner.keys_are_unique()
    }

    /// Union of the keys of every ``row`` and ``pk`` object, in first-seen order.
    fn column_names(&self) -> Vec<String> {
        self.inner.column_names()
    }

    /// Rows as PostgreSQL COPY text (or, with `binary`, binary) format, one row per
    /// row op, releasing the GIL.
    #[pyo3(signature = (columns, *, binary = false, device_id = None))]
    fn encode_state_copy<'py>(
        &self,
        py: Python<'py>,
        columns: Vec<(String, String)>,
        binary: bool,
        device_id: Option<String>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let columns = parse_columns(columns)?;
        check_device_id(device_id.as_deref())?;
        let (inner, device_id) = (&self.inner, device_id.as_deref());
        let out = py
            .detach(|| {
                if binary {
                    inner.encode_state_binary(&columns, device_id)
                } else {
                    inner.encode_state_copy(&columns, device_id)
                }
            })
            .into_py_result()?;
        Ok(PyBytes::new(py, &out))
    }

    /// `(pk_hash, commit_seq, lkcv)` of the rows that carry an `lkcv`.
    fn lkcv_rows(&self) -> Vec<(String, i64, i64)> {
        self.inner
            .rows
            .iter()
            .filter_map(|r| r.lkcv.map(|v| (r.pk_hash().to_owned(), r.commit_seq, v)))
            .collect()
    }

    fn __repr__(&self) -> String {
        format!(
            "RowBatch(source_table={:?}, batch_id={:?}, rows={}, commit_seq={}..{})",
            self.inner.source_table,
            self.inner.batch_id,
            self.inner.row_count(),
            self.inner.first_commit_seq,
            self.inner.last_commit_seq
        )
    }
}

/// Decode and validate a row batch, releasing the GIL; raises BatchRejected.
#[pyfunction]
#[pyo3(signature = (payload, max_payload_bytes = None))]
fn decode_row_batch(
    py: Python<'_>,
    payload: &Bound<'_, PyAny>,
    max_payload_bytes: Option<usize>,
) -> PyResult<PyRowBatch> {
    let payload = byte_arg(payload, "payload")?;
    let limit = max_payload_bytes.unwrap_or(core::MAX_BATCH_BYTES);
    let inner = py
        .detach(|| core::decode_row_batch_within(&payload, limit))
        .into_py_result()?;
    Ok(PyRowBatch { inner })
}

/// A validated ``sync/telemetry/batch`` payload, kept in Rust memory.
#[pyclass(frozen, name = "TelemetryBatch", module = "edgesync._core")]
struct PyTelemetryBatch {
    inner: core::TelemetryBatch,
}

fn parse_columns(columns: Vec<(String, String)>) -> PyResult<Vec<(String, core::PgType)>> {
    columns
        .into_iter()
        .map(|(name, ty)| Ok((name, ty.parse::<core::PgType>()?)))
        .collect::<Result<Vec<_>, core::CoreError>>()
        .into_py_result()
}

#[pymethods]
impl PyTelemetryBatch {
    #[getter]
    fn format_version(&self) -> i64 {
        self.inner.format_version
    }

    #[getter]
    fn capture_strategy(&self) -> &str {
        &self.inner.capture_strategy
    }

    #[getter]
    fn batch_id(&self) -> &str {
        &self.inner.batch_id
    }

    #[getter]
    fn batch_seq(&self) -> i64 {
        self.inner.batch_seq
    }

    #[getter]
    fn source_table(&self) -> &str {
        &self.inner.source_table
    }

    #[getter]
    fn schema_hash(&self) -> &str {
        &self.inner.schema_hash
    }

    /// The ``schema_columns`` object re-serialized canonically, when present.
    #[getter]
    fn schema_columns_json<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.inner
            .schema_columns_json
            .as_ref()
            .map(|s| PyBytes::new(py, s.as_bytes()))
    }

    #[getter]
    fn cursor_start_ts(&self) -> &str {
        &self.inner.cursor_start_ts
    }

    #[getter]
    fn cursor_end_ts(&self) -> &str {
        &self.inner.cursor_end_ts
    }

    /// Earliest row ``ts`` as ISO 8601 UTC with microseconds.
    #[getter]
    fn first_event_ts(&self) -> String {
        self.inner.first_event_ts.to_iso()
    }

    /// Latest row ``ts`` as ISO 8601 UTC with microseconds.
    #[getter]
    fn last_event_ts(&self) -> String {
        self.inner.last_event_ts.to_iso()
    }

    #[getter]
    fn row_count(&self) -> usize {
        self.inner.row_count()
    }

    #[getter]
    fn payload_size(&self) -> usize {
        self.inner.payload_size
    }

    /// Union of the keys of every row's ``fields``, in first-seen order.
    fn field_names(&self) -> Vec<String> {
        self.inner.field_names()
    }

    /// Rows as PostgreSQL COPY text (or, with `binary`, binary) format, one row per
    /// row, releasing the GIL.
    #[pyo3(signature = (columns, device_id = None, *, binary = false))]
    fn encode_telemetry_copy<'py>(
        &self,
        py: Python<'py>,
        columns: Vec<(String, String)>,
        device_id: Option<String>,
        binary: bool,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let columns = parse_columns(columns)?;
        check_device_id(device_id.as_deref())?;
        let (inner, device_id) = (&self.inner, device_id.as_deref());
        let out = py
            .detach(|| {
                if binary {
                    inner.encode_telemetry_binary(&columns, device_id)
                } else {
                    inner.encode_telemetry_copy(&columns, device_id)
                }
            })
            .into_py_result()?;
        Ok(PyBytes::new(py, &out))
    }

    fn __repr__(&self) -> String {
        format!(
            "TelemetryBatch(source_table={:?}, batch_id={:?}, batch_seq={}, rows={})",
            self.inner.source_table,
            self.inner.batch_id,
            self.inner.batch_seq,
            self.inner.row_count()
        )
    }
}

fn check_device_id(device_id: Option<&str>) -> PyResult<()> {
    match device_id {
        Some(d) if !core::envelope::is_uuid(d) => Err(PyValueError::new_err(format!(
            "device_id must be a hyphenated UUID, got {d:?}"
        ))),
        _ => Ok(()),
    }
}

/// The ``batch_id`` of a payload, read without decoding the rest; None if not found cheaply.
#[pyfunction]
fn peek_batch_id(payload: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    let payload = byte_arg(payload, "payload")?;
    Ok(core::peek_batch_id(&payload))
}

/// Decode and validate a telemetry batch, releasing the GIL; raises BatchRejected.
#[pyfunction]
fn decode_telemetry_batch(
    py: Python<'_>,
    payload: &Bound<'_, PyAny>,
) -> PyResult<PyTelemetryBatch> {
    let payload = byte_arg(payload, "payload")?;
    let inner = py
        .detach(|| core::decode_telemetry_batch(&payload))
        .into_py_result()?;
    Ok(PyTelemetryBatch { inner })
}

/// One journal entry of a batch: its ``commit_seq`` and row JSON (None when gone).
#[pyclass(frozen, name = "JournalRow", module = "edgesync._core")]
struct PyJournalRow {
    #[pyo3(get)]
    commit_seq: i64,
    #[pyo3(get)]
    encoded: Option<Py<PyBytes>>,
}

#[pymethods]
impl PyJournalRow {
    #[new]
    fn new(commit_seq: i64, encoded: Option<Py<PyBytes>>) -> Self {
        PyJournalRow {
            commit_seq,
            encoded,
        }
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let size = self.encoded.as_ref().map(|b| b.bind(py).as_bytes().len());
        format!(
            "JournalRow(commit_seq={}, encoded={})",
            self.commit_seq,
            size.map_or("None".to_owned(), |n| format!("<{n} bytes>"))
        )
    }
}

/// A SQLite value as Python's sqlite3 returns it.
fn sqlite_value<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<core::rowjson::Value<'a>> {
    use core::rowjson::Value;
    if obj.is_none() {
        Ok(Value::Null)
    } else if let Ok(s) = obj.cast::<PyString>() {
        Ok(Value::Text(s.to_str()?))
    } else if let Ok(i) = obj.cast::<PyInt>() {
        Ok(Value::Integer(i.extract::<i64>()?))
    } else if let Ok(f) = obj.cast::<PyFloat>() {
        Ok(Value::Real(f.value()))
    } else if let Ok(b) = obj.cast::<PyBytes>() {
        Ok(Value::Blob(b.as_bytes()))
    } else {
        Err(PyTypeError::new_err(format!(
            "not a SQLite value: {}",
            obj.get_type().name()?
        )))
    }
}

/// Writes batch entries of one table from rows fetched by Python's sqlite3.
#[pyclass(frozen, name = "RowEncoder", module = "edgesync._core")]
struct PyRowEncoder {
    inner: core::rowjson::RowEncoder,
    live_index: usize,
}

#[pymethods]
impl PyRowEncoder {
    #[new]
    fn new(pk_names: Vec<String>, row_names: Vec<String>, live_index: usize) -> PyResult<Self> {
        let pk: Vec<&str> = pk_names.iter().map(String::as_str).collect();
        let row: Vec<&str> = row_names.iter().map(String::as_str).collect();
        if live_index < 2 {
            return Err(PyValueError::new_err("live_index must be at least 2"));
        }
        Ok(PyRowEncoder {
            inner: core::rowjson::RowEncoder::new(&pk, &row),
            live_index,
        })
    }

    /// One JournalRow per ``(commit_seq, op, *pk, *row, ...)`` tuple.
    fn encode_rows<'py>(
        &self,
        py: Python<'py>,
        rows: &Bound<'py, PyList>,
    ) -> PyResult<Bound<'py, PyList>> {
        let width = self.inner.entry_width(self.live_index);
        let out = PyList::empty(py);
        let mut buf: Vec<u8> = Vec::with_capacity(256);
        for item in rows.iter() {
            let row = item.cast::<PyTuple>()?;
            if row.len() < width {
                return Err(PyValueError::new_err(format!(
                    "row tuple has {} values, needs {width}",
                    row.len()
                )));
            }
            let src = TupleRow(row);
            buf.clear();
            let encoded = self
                .inner
                .encode_entry(&mut buf, self.live_index, &src)?
                .then(|| PyBytes::new(py, &buf).unbind());
            out.append(Py::new(
                py,
                PyJournalRow {
                    commit_seq: src.commit_seq()?,
                    encoded,
                },
            )?)?;
        }
        Ok(out)
    }
}

/// A row tuple fetched by Python's `sqlite3`, as the source of a journal entry.
struct TupleRow<'a, 'py>(&'a Bound<'py, PyTuple>);

impl EntrySource for TupleRow<'_, '_> {
    type Error = PyErr;

    fn commit_seq(&self) -> PyResult<i64> {
        self.0.get_borrowed_item(0)?.extract()
    }

    fn with_op<R>(&self, f: impl FnOnce(&str) -> R) -> PyResult<R> {
        let op = self.0.get_borrowed_item(1)?;
        Ok(f(op.cast::<PyString>()?.to_str()?))
    }

    fn is_null(&self, i: usize) -> PyResult<bool> {
        Ok(self.0.get_borrowed_item(i)?.is_none())
    }

    fn with_value<R>(
        &self,
        i: usize,
        f: impl FnOnce(core::rowjson::Value<'_>) -> R,
    ) -> PyResult<R> {
        let v = self.0.get_borrowed_item(i)?;
        Ok(f(sqlite_value(&v)?))
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_BATCH_ROWS", core::MAX_BATCH_ROWS)?;
    m.add("MAX_BATCH_BYTES", core::MAX_BATCH_BYTES)?;
    m.add("SUPPORTED_FORMAT_VERSION", core::SUPPORTED_FORMAT_VERSION)?;
    m.add("ROW_CAPTURE_STRATEGY", core::ROW_CAPTURE_STRATEGY)?;
    m.add(
        "TELEMETRY_CAPTURE_STRATEGY",
        core::TELEMETRY_CAPTURE_STRATEGY,
    )?;
    let codes: Vec<&str> = core::RejectionCode::ALL
        .iter()
        .map(|c| c.as_str())
        .collect();
    m.add("REJECTION_CODES", PyTuple::new(m.py(), codes)?)?;
    m.add_function(wrap_pyfunction!(sqlite_affinity, m)?)?;
    m.add_function(wrap_pyfunction!(schema_fingerprint, m)?)?;
    m.add_function(wrap_pyfunction!(pk_hash, m)?)?;
    m.add_function(wrap_pyfunction!(compress_blob, m)?)?;
    m.add_function(wrap_pyfunction!(decompress_blob, m)?)?;
    m.add_function(wrap_pyfunction!(decode_row_batch, m)?)?;
    m.add_class::<PyRowBatch>()?;
    m.add_function(wrap_pyfunction!(decode_telemetry_batch, m)?)?;
    m.add_class::<PyTelemetryBatch>()?;
    m.add_function(wrap_pyfunction!(peek_batch_id, m)?)?;
    m.add_class::<PyJournalRow>()?;
    m.add_class::<PyRowEncoder>()?;
    m.add_class::<journal_reader::PyJournalReader>()?;
    Ok(())
}
