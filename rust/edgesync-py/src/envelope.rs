//! `Envelope`: the base class of `RowBatch` and `TelemetryBatch`, holding the decoded
//! batch and answering the envelope getters both share (`edgesync_core::Envelope`).

use edgesync_core as core;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The decoded batch a `RowBatch` or `TelemetryBatch` wraps: kept in the base class so
/// its getters read the one `core::Envelope` of either kind.
pub(crate) enum Decoded {
    Rows(core::RowBatch),
    Telemetry(core::TelemetryBatch),
}

/// The fields every validated batch carries (not constructible from Python).
#[pyclass(frozen, subclass, name = "Envelope", module = "edgesync._core")]
pub(crate) struct PyEnvelope {
    pub(crate) batch: Decoded,
}

impl PyEnvelope {
    fn envelope(&self) -> &core::Envelope {
        match &self.batch {
            Decoded::Rows(b) => &b.envelope,
            Decoded::Telemetry(b) => &b.envelope,
        }
    }
}

#[pymethods]
impl PyEnvelope {
    #[getter]
    fn format_version(&self) -> i64 {
        self.envelope().format_version
    }

    #[getter]
    fn capture_strategy(&self) -> &str {
        &self.envelope().capture_strategy
    }

    #[getter]
    fn batch_id(&self) -> &str {
        &self.envelope().batch_id
    }

    #[getter]
    fn source_table(&self) -> &str {
        &self.envelope().source_table
    }

    #[getter]
    fn schema_hash(&self) -> &str {
        &self.envelope().schema_hash
    }

    /// The ``schema_columns`` object re-serialized canonically, when present.
    #[getter]
    fn schema_columns_json<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.envelope()
            .schema_columns_json
            .as_ref()
            .map(|s| PyBytes::new(py, s.as_bytes()))
    }

    /// Unix milliseconds at which the agent first saw the batch's oldest change
    /// (the optional ``first_seen_at_ms`` field), or None.
    #[getter]
    fn first_seen_at_ms(&self) -> Option<i64> {
        self.envelope().first_seen_at_ms
    }

    #[getter]
    fn payload_size(&self) -> usize {
        self.envelope().payload_size
    }

    #[getter]
    fn row_count(&self) -> usize {
        match &self.batch {
            Decoded::Rows(b) => b.row_count(),
            Decoded::Telemetry(b) => b.row_count(),
        }
    }
}
