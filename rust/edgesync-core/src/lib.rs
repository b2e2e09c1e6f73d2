//! Pure-Rust hot paths of edgesync.
//!
//! One concept per module:
//! - [`error`]: the single error enum [`CoreError`].
//! - [`rejection`]: the protocol rejection codes ([`RejectionCode`]).
//! - [`affinity`]: SQLite declared type → column affinity.
//! - [`canonical`]: canonical JSON (sorted keys, no whitespace).
//! - [`fingerprint`]: schema fingerprints (`schema_hash`).
//! - [`pkhash`]: `source_pk_hash` of a row's `pk` object.
//! - [`blob`]: zstd compression of staged blobs.
//! - [`frame`]: compressed batches (one zstd frame of the batch JSON) inflated, bounded.
//! - [`rawjson`]: one-pass parsing that keeps row values as raw JSON slices.
//! - [`envelope`]: the envelope checks shared by row and telemetry batches.
//! - [`row_batch`]: decoding and validation of `sync/rows/batch` payloads.
//! - [`telemetry`]: decoding and validation of `sync/telemetry/batch` payloads.
//! - [`timestamp`]: RFC 3339 timestamps as instants.
//! - [`copy`]: PostgreSQL COPY text encoding of decoded rows.
//! - [`copy_binary`]: the same rows in COPY binary format.
//! - [`rowjson`]: the row JSON of batch entries, written from SQLite values.
//! - [`sqlite_api`]: the SQLite C API of the library Python's `sqlite3` already loaded.
//! - [`journal_reader`]: journal rows read from SQLite and written as batch entries.
//! - [`select`]: row subsets of decoded batches and one row's JSON (per-row quarantine).

pub mod affinity;
pub mod blob;
pub mod canonical;
pub mod copy;
pub mod copy_binary;
pub mod envelope;
pub mod error;
pub mod fingerprint;
pub mod frame;
pub mod journal_reader;
pub mod pkhash;
pub mod rawjson;
pub mod rejection;
pub mod row_batch;
pub mod rowjson;
pub mod select;
pub mod sqlite_api;
pub mod telemetry;
pub mod timestamp;

pub use affinity::{sqlite_affinity, Affinity};
pub use blob::{compress_blob, decompress_blob};
pub use copy::PgType;
pub use copy_binary::binary_supported;
pub use envelope::{Envelope, MAX_BATCH_BYTES, MAX_BATCH_ROWS, SUPPORTED_FORMAT_VERSION};
pub use error::CoreError;
pub use fingerprint::{schema_fingerprint, ColumnSpec, Fingerprint};
pub use frame::{inflate_batch, is_compressed, ZSTD_MAGIC};
pub use pkhash::{pk_hash, pk_hash_json};
pub use rejection::RejectionCode;
pub use row_batch::{
    decode_row_batch, decode_row_batch_within, Op, Row, RowBatch,
    CAPTURE_STRATEGY as ROW_CAPTURE_STRATEGY,
};
pub use telemetry::{decode_telemetry_batch, Sample, TelemetryBatch, TELEMETRY_CAPTURE_STRATEGY};
pub use timestamp::{parse_rfc3339, Instant};
