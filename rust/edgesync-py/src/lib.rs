//! `edgesync._core`: thin PyO3 bindings over `edgesync-core`, one module per class.
//!
//! Heavy calls release the GIL. Every error goes through [`errors::to_pyerr`].

mod allocator;
mod args;
mod envelope;
mod errors;
mod functions;
mod journal_reader;
mod row_batch;
mod row_encoder;
mod telemetry_batch;

use edgesync_core as core;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    m.add_function(wrap_pyfunction!(functions::sqlite_affinity, m)?)?;
    m.add_function(wrap_pyfunction!(functions::schema_fingerprint, m)?)?;
    m.add_function(wrap_pyfunction!(functions::pk_hash, m)?)?;
    m.add_function(wrap_pyfunction!(functions::compress_blob, m)?)?;
    m.add_function(wrap_pyfunction!(allocator::heap_purge_delay, m)?)?;
    m.add_function(wrap_pyfunction!(allocator::set_heap_purge_delay, m)?)?;
    m.add_function(wrap_pyfunction!(functions::decompress_blob, m)?)?;
    m.add_function(wrap_pyfunction!(functions::inflate_batch, m)?)?;
    m.add(
        "ZSTD_MAGIC",
        pyo3::types::PyBytes::new(m.py(), &core::ZSTD_MAGIC),
    )?;
    m.add_class::<envelope::PyEnvelope>()?;
    m.add_function(wrap_pyfunction!(row_batch::decode_row_batch, m)?)?;
    m.add_class::<row_batch::PyRowBatch>()?;
    m.add_function(wrap_pyfunction!(
        telemetry_batch::decode_telemetry_batch,
        m
    )?)?;
    m.add_class::<telemetry_batch::PyTelemetryBatch>()?;
    m.add_class::<row_encoder::PyJournalRow>()?;
    m.add_class::<row_encoder::PyRowEncoder>()?;
    m.add_class::<journal_reader::PyJournalReader>()?;
    Ok(())
}
