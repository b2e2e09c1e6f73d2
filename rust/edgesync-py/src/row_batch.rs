//! `RowBatch` (a validated `sync/rows/batch` payload) and `decode_row_batch`.

use edgesync_core as core;
use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::args::{bad_rows, byte_arg, check_device_id, parse_columns};
use crate::envelope::{Decoded, PyEnvelope};
use crate::errors::IntoPyResult;

/// A validated ``sync/rows/batch`` payload, kept in Rust memory.
#[pyclass(frozen, extends = PyEnvelope, name = "RowBatch", module = "edgesync._core")]
pub(crate) struct PyRowBatch;

/// The row batch of a `RowBatch`'s base.
fn rows<'a>(slf: &'a Bound<'_, PyRowBatch>) -> &'a core::RowBatch {
    match &slf.as_super().get().batch {
        Decoded::Rows(b) => b,
        // decode_row_batch is the only constructor and wraps Decoded::Rows
        Decoded::Telemetry(_) => unreachable!("a RowBatch wraps a row batch"),
    }
}

#[pymethods]
impl PyRowBatch {
    #[getter]
    fn journal_epoch<'a>(slf: &'a Bound<'_, Self>) -> &'a str {
        &rows(slf).journal_epoch
    }

    #[getter]
    fn first_commit_seq(slf: &Bound<'_, Self>) -> i64 {
        rows(slf).first_commit_seq
    }

    #[getter]
    fn last_commit_seq(slf: &Bound<'_, Self>) -> i64 {
        rows(slf).last_commit_seq
    }

    /// True when no two row ops share a primary key.
    #[getter]
    fn keys_are_unique(slf: &Bound<'_, Self>) -> bool {
        rows(slf).keys_are_unique()
    }

    /// Union of the keys of every ``row`` and ``pk`` object, in first-seen order.
    fn column_names(slf: &Bound<'_, Self>) -> Vec<String> {
        rows(slf).column_names()
    }

    /// Rows as PostgreSQL COPY text (or, with `binary`, binary) format, one row per
    /// row op, releasing the GIL.
    #[pyo3(signature = (columns, *, binary = false, device_id = None))]
    fn encode_state_copy<'py>(
        slf: &Bound<'py, Self>,
        columns: Vec<(String, String)>,
        binary: bool,
        device_id: Option<String>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let py = slf.py();
        let columns = parse_columns(columns)?;
        check_device_id(device_id.as_deref())?;
        let (inner, device_id) = (rows(slf), device_id.as_deref());
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

    /// The batch with only the rows at ``indices`` (per-row quarantine); ValueError
    /// when one is out of range or none is given.
    fn select<'py>(slf: &Bound<'py, Self>, indices: Vec<usize>) -> PyResult<Bound<'py, Self>> {
        let inner = rows(slf)
            .select(&indices)
            .ok_or_else(|| bad_rows(&indices))?;
        let init = PyClassInitializer::from(PyEnvelope {
            batch: Decoded::Rows(inner),
        })
        .add_subclass(PyRowBatch);
        Bound::new(slf.py(), init)
    }

    /// ``(commit_seq, op, pk_hash, row_json)`` of row ``index``; IndexError out of range.
    fn row_at(
        slf: &Bound<'_, Self>,
        index: usize,
    ) -> PyResult<(i64, &'static str, String, String)> {
        let b = rows(slf);
        let (r, json) = b
            .rows
            .get(index)
            .zip(b.row_json(index))
            .ok_or_else(|| PyIndexError::new_err(index))?;
        Ok((r.commit_seq, r.op.as_str(), r.pk_hash().to_owned(), json))
    }

    /// `(pk_hash, commit_seq, lkcv)` of the rows that carry an `lkcv`.
    fn lkcv_rows(slf: &Bound<'_, Self>) -> Vec<(String, i64, i64)> {
        rows(slf)
            .rows
            .iter()
            .filter_map(|r| r.lkcv.map(|v| (r.pk_hash().to_owned(), r.commit_seq, v)))
            .collect()
    }

    fn __repr__(slf: &Bound<'_, Self>) -> String {
        let b = rows(slf);
        format!(
            "RowBatch(source_table={:?}, batch_id={:?}, rows={}, commit_seq={}..{})",
            b.envelope.source_table,
            b.envelope.batch_id,
            b.row_count(),
            b.first_commit_seq,
            b.last_commit_seq
        )
    }
}

/// Decode and validate a row batch, releasing the GIL; raises BatchRejected.
#[pyfunction]
#[pyo3(signature = (payload, max_payload_bytes = None))]
pub(crate) fn decode_row_batch<'py>(
    py: Python<'py>,
    payload: &Bound<'py, PyAny>,
    max_payload_bytes: Option<usize>,
) -> PyResult<Bound<'py, PyRowBatch>> {
    let payload = byte_arg(payload, "payload")?;
    let limit = max_payload_bytes.unwrap_or(core::MAX_BATCH_BYTES);
    let inner = py
        .detach(|| core::decode_row_batch_within(&payload, limit))
        .into_py_result()?;
    let init = PyClassInitializer::from(PyEnvelope {
        batch: Decoded::Rows(inner),
    })
    .add_subclass(PyRowBatch);
    Bound::new(py, init)
}
