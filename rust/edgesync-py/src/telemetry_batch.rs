//! `TelemetryBatch` (a validated `sync/telemetry/batch` payload) and
//! `decode_telemetry_batch`.

use edgesync_core as core;
use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::args::{bad_rows, byte_arg, check_device_id, parse_columns};
use crate::envelope::{Decoded, PyEnvelope};
use crate::errors::IntoPyResult;

/// A validated ``sync/telemetry/batch`` payload, kept in Rust memory.
#[pyclass(frozen, extends = PyEnvelope, name = "TelemetryBatch", module = "edgesync._core")]
pub(crate) struct PyTelemetryBatch;

/// The telemetry batch of a `TelemetryBatch`'s base.
fn telemetry<'a>(slf: &'a Bound<'_, PyTelemetryBatch>) -> &'a core::TelemetryBatch {
    match &slf.as_super().get().batch {
        Decoded::Telemetry(b) => b,
        // decode_telemetry_batch is the only constructor and wraps Decoded::Telemetry
        Decoded::Rows(_) => unreachable!("a TelemetryBatch wraps a telemetry batch"),
    }
}

#[pymethods]
impl PyTelemetryBatch {
    #[getter]
    fn batch_seq(slf: &Bound<'_, Self>) -> i64 {
        telemetry(slf).batch_seq
    }

    #[getter]
    fn cursor_start_ts<'a>(slf: &'a Bound<'_, Self>) -> &'a str {
        &telemetry(slf).cursor_start_ts
    }

    #[getter]
    fn cursor_end_ts<'a>(slf: &'a Bound<'_, Self>) -> &'a str {
        &telemetry(slf).cursor_end_ts
    }

    /// Earliest row ``ts`` as ISO 8601 UTC with microseconds.
    #[getter]
    fn first_event_ts(slf: &Bound<'_, Self>) -> String {
        telemetry(slf).first_event_ts.to_iso()
    }

    /// Latest row ``ts`` as ISO 8601 UTC with microseconds.
    #[getter]
    fn last_event_ts(slf: &Bound<'_, Self>) -> String {
        telemetry(slf).last_event_ts.to_iso()
    }

    /// Union of the keys of every row's ``fields``, in first-seen order.
    fn field_names(slf: &Bound<'_, Self>) -> Vec<String> {
        telemetry(slf).field_names()
    }

    /// Rows as PostgreSQL COPY text (or, with `binary`, binary) format, one row per
    /// row, releasing the GIL.
    #[pyo3(signature = (columns, device_id = None, *, binary = false))]
    fn encode_telemetry_copy<'py>(
        slf: &Bound<'py, Self>,
        columns: Vec<(String, String)>,
        device_id: Option<String>,
        binary: bool,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let py = slf.py();
        let columns = parse_columns(columns)?;
        check_device_id(device_id.as_deref())?;
        let (inner, device_id) = (telemetry(slf), device_id.as_deref());
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

    /// The batch with only the rows at ``indices`` (per-row quarantine); ValueError
    /// when one is out of range or none is given.
    fn select<'py>(slf: &Bound<'py, Self>, indices: Vec<usize>) -> PyResult<Bound<'py, Self>> {
        let inner = telemetry(slf)
            .select(&indices)
            .ok_or_else(|| bad_rows(&indices))?;
        let init = PyClassInitializer::from(PyEnvelope {
            batch: Decoded::Telemetry(inner),
        })
        .add_subclass(PyTelemetryBatch);
        Bound::new(slf.py(), init)
    }

    /// ``(event_ts, row_id, row_json)`` of row ``index``; IndexError out of range.
    fn row_at(slf: &Bound<'_, Self>, index: usize) -> PyResult<(String, Option<String>, String)> {
        let b = telemetry(slf);
        let (r, json) = b
            .rows
            .get(index)
            .zip(b.row_json(index))
            .ok_or_else(|| PyIndexError::new_err(index))?;
        Ok((r.ts.to_iso(), r.row_id().map(str::to_owned), json))
    }

    fn __repr__(slf: &Bound<'_, Self>) -> String {
        let b = telemetry(slf);
        format!(
            "TelemetryBatch(source_table={:?}, batch_id={:?}, batch_seq={}, rows={})",
            b.envelope.source_table,
            b.envelope.batch_id,
            b.batch_seq,
            b.row_count()
        )
    }
}

/// Decode and validate a telemetry batch, releasing the GIL; raises BatchRejected.
#[pyfunction]
pub(crate) fn decode_telemetry_batch<'py>(
    py: Python<'py>,
    payload: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTelemetryBatch>> {
    let payload = byte_arg(payload, "payload")?;
    let inner = py
        .detach(|| core::decode_telemetry_batch(&payload))
        .into_py_result()?;
    let init = PyClassInitializer::from(PyEnvelope {
        batch: Decoded::Telemetry(inner),
    })
    .add_subclass(PyTelemetryBatch);
    Bound::new(py, init)
}
