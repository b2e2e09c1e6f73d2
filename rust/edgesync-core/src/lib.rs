//! Pure-Rust hot paths of edgesync.
//!
//! One concept per module:
//! - [`error`]: the single error enum [`CoreError`].
//! - [`affinity`]: SQLite declared type → column affinity.
//! - [`canonical`]: canonical JSON (sorted keys, no whitespace).
//! - [`fingerprint`]: schema fingerprints (`schema_hash`).
//! - [`pkhash`]: `source_pk_hash` of a row's `pk` object.
//! - [`blob`]: zstd compression of staged blobs.
//! - [`envelope`]: decoding and validation of `sync/rows/batch` payloads.
//! - [`copy`]: PostgreSQL COPY text encoding of decoded rows.

pub mod affinity;
pub mod blob;
pub mod canonical;
pub mod copy;
pub mod envelope;
pub mod error;
pub mod fingerprint;
pub mod pkhash;

pub use affinity::{sqlite_affinity, Affinity};
pub use blob::{compress_blob, decompress_blob};
pub use copy::PgType;
pub use envelope::{
    decode_row_batch, Op, Row, RowBatch, MAX_BATCH_BYTES, MAX_BATCH_ROWS, SUPPORTED_FORMAT_VERSION,
};
pub use error::CoreError;
pub use fingerprint::{schema_fingerprint, ColumnSpec, Fingerprint};
pub use pkhash::{pk_hash, pk_hash_json};
