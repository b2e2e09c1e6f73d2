//! The protocol rejection codes the batch decoders and COPY encoders answer.
//!
//! Every [`crate::CoreError::Rejected`] carries one of these, so a code cannot be
//! misspelled and the whole set is known: `edgesync._core.REJECTION_CODES` exports
//! [`RejectionCode::ALL`], and a Python test checks it against the decoder subset
//! of `edgesync.protocol.RejectionCode` (which adds the codes the Python pipeline
//! answers itself: `invalid_topic`, `unknown_device`, …).
//!
//! To add a code: a line in `rejection_codes!` below, the same value in
//! `python/edgesync/protocol/_rejection.py` (in `DECODER_CODES`), a row in
//! `docs/protocol.md` ("Rejection codes").

use std::fmt;

/// Defines [`RejectionCode`] from one list, so `ALL` and `as_str` cannot miss a variant.
macro_rules! rejection_codes {
    ($($(#[$doc:meta])* $variant:ident = $wire:literal,)+) => {
        /// A protocol rejection code (snake_case on the wire, in the ledger and in docs).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum RejectionCode {
            $($(#[$doc])* $variant,)+
        }

        impl RejectionCode {
            /// Every code, in the order the decoders check them.
            pub const ALL: &'static [RejectionCode] = &[$(RejectionCode::$variant,)+];

            /// The code as written on the wire.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(RejectionCode::$variant => $wire,)+
                }
            }
        }
    };
}

rejection_codes! {
    PayloadTooLarge = "payload_too_large",
    MalformedJson = "malformed_json",
    InvalidNumberEncoding = "invalid_number_encoding",
    EnvelopeUnstrippedTenantFields = "envelope_unstripped_tenant_fields",
    InvalidFormatVersion = "invalid_format_version",
    UnsupportedFormatVersion = "unsupported_format_version",
    UnsupportedCaptureStrategy = "unsupported_capture_strategy",
    InvalidBatchId = "invalid_batch_id",
    InvalidJournalEpoch = "invalid_journal_epoch",
    InvalidBatchSeq = "invalid_batch_seq",
    InvalidSourceTable = "invalid_source_table",
    InvalidSchemaHash = "invalid_schema_hash",
    BatchTooManyRows = "batch_too_many_rows",
    InvalidRows = "invalid_rows",
    InvalidRow = "invalid_row",
    InvalidRowId = "invalid_row_id",
    RowCountMismatch = "row_count_mismatch",
    CommitSeqMismatch = "commit_seq_mismatch",
    CursorTimestampMismatch = "cursor_timestamp_mismatch",
    InvalidSchemaColumns = "invalid_schema_columns",
    SchemaHashMismatch = "schema_hash_mismatch",
    /// From the COPY encoders: a value that cannot be written as its column's type.
    ValueTypeMismatch = "value_type_mismatch",
}

impl fmt::Display for RejectionCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Lets tests and callers compare a code with its wire spelling.
impl PartialEq<&str> for RejectionCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<RejectionCode> for &str {
    fn eq(&self, other: &RejectionCode) -> bool {
        *self == other.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn all_lists_each_variant_once_with_a_distinct_snake_case_spelling() {
        let names: HashSet<&str> = RejectionCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names.len(), RejectionCode::ALL.len());
        for name in names {
            assert!(
                name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{name}"
            );
        }
    }

    #[test]
    fn display_and_comparison_use_the_wire_spelling() {
        assert_eq!(RejectionCode::InvalidRow.to_string(), "invalid_row");
        assert!(RejectionCode::MalformedJson == "malformed_json");
        assert!("payload_too_large" == RejectionCode::PayloadTooLarge);
    }
}
