"""Every protocol rejection code, in one enum.

A rejected message is answered (``IngestOutcome.code``) and recorded in the ledger
(``edge_export_segments.rejection_code``) with one of these. Most come from the Rust
decoders (``edgesync._core.REJECTION_CODES``, the members of ``DECODER_CODES``); the
others are answered by the Python pipeline before or after decoding. ``docs/protocol.md``
("Rejection codes") lists each; ``tests/protocol/test_rejection_codes.py`` keeps the
three in step.

To add a code answered in Python: a member here, a row in docs/protocol.md. One the Rust
decoder answers: also a line in ``rejection_codes!`` (rust/edgesync-core/src/rejection.rs)
and the member in ``DECODER_CODES``.
"""

from __future__ import annotations

import enum

__all__ = ["DECODER_CODES", "RejectionCode"]


class RejectionCode(enum.StrEnum):
    # Decoded by Rust (edgesync._core), in the order the checks run.
    PAYLOAD_TOO_LARGE = "payload_too_large"
    MALFORMED_JSON = "malformed_json"
    INVALID_NUMBER_ENCODING = "invalid_number_encoding"
    ENVELOPE_UNSTRIPPED_TENANT_FIELDS = "envelope_unstripped_tenant_fields"
    INVALID_FORMAT_VERSION = "invalid_format_version"
    UNSUPPORTED_FORMAT_VERSION = "unsupported_format_version"
    UNSUPPORTED_CAPTURE_STRATEGY = "unsupported_capture_strategy"
    INVALID_BATCH_ID = "invalid_batch_id"
    INVALID_JOURNAL_EPOCH = "invalid_journal_epoch"
    INVALID_BATCH_SEQ = "invalid_batch_seq"
    INVALID_SOURCE_TABLE = "invalid_source_table"
    INVALID_SCHEMA_HASH = "invalid_schema_hash"
    BATCH_TOO_MANY_ROWS = "batch_too_many_rows"
    INVALID_ROWS = "invalid_rows"
    INVALID_ROW = "invalid_row"
    INVALID_ROW_ID = "invalid_row_id"
    ROW_COUNT_MISMATCH = "row_count_mismatch"
    COMMIT_SEQ_MISMATCH = "commit_seq_mismatch"
    CURSOR_TIMESTAMP_MISMATCH = "cursor_timestamp_mismatch"
    INVALID_SCHEMA_COLUMNS = "invalid_schema_columns"
    SCHEMA_HASH_MISMATCH = "schema_hash_mismatch"
    VALUE_TYPE_MISMATCH = "value_type_mismatch"
    # Answered by the Python pipeline.
    INVALID_TOPIC = "invalid_topic"
    UNKNOWN_DEVICE = "unknown_device"
    INVALID_ACK = "invalid_ack"
    DUPLICATE_BATCH_SEQ = "duplicate_batch_seq"
    INVALID_GAP_REPORT = "invalid_gap_report"
    INVALID_SEGMENT_KIND = "invalid_segment_kind"
    UNKNOWN_UPLOAD = "unknown_upload"
    UPLOAD_INCOMPLETE = "upload_incomplete"
    INVALID_RECOVERY_REPORT = "invalid_recovery_report"  # resnapshot_status / verify_digest
    INVALID_STATUS_REPORT = "invalid_status_report"
    UNSUPPORTED_REQUEST_KIND = "unsupported_request_kind"  # an ignored request, recorded
    UNSTORABLE_TEXT = "unstorable_text"  # text PostgreSQL cannot hold (a NUL, bad encoding)
    # A batch the worker could neither write nor stage, alone, again and again: the last
    # resort that keeps it in the ledger (the device re-sends it, never confirmed).
    INGEST_FAILED = "ingest_failed"


DECODER_CODES: frozenset[RejectionCode] = frozenset({
    RejectionCode.PAYLOAD_TOO_LARGE, RejectionCode.MALFORMED_JSON,
    RejectionCode.INVALID_NUMBER_ENCODING, RejectionCode.ENVELOPE_UNSTRIPPED_TENANT_FIELDS,
    RejectionCode.INVALID_FORMAT_VERSION, RejectionCode.UNSUPPORTED_FORMAT_VERSION,
    RejectionCode.UNSUPPORTED_CAPTURE_STRATEGY, RejectionCode.INVALID_BATCH_ID,
    RejectionCode.INVALID_JOURNAL_EPOCH, RejectionCode.INVALID_BATCH_SEQ,
    RejectionCode.INVALID_SOURCE_TABLE, RejectionCode.INVALID_SCHEMA_HASH,
    RejectionCode.BATCH_TOO_MANY_ROWS, RejectionCode.INVALID_ROWS, RejectionCode.INVALID_ROW,
    RejectionCode.INVALID_ROW_ID, RejectionCode.ROW_COUNT_MISMATCH,
    RejectionCode.COMMIT_SEQ_MISMATCH, RejectionCode.CURSOR_TIMESTAMP_MISMATCH,
    RejectionCode.INVALID_SCHEMA_COLUMNS, RejectionCode.SCHEMA_HASH_MISMATCH,
    RejectionCode.VALUE_TYPE_MISMATCH,
})
"""The codes the Rust decoders and COPY encoders answer (``_core.REJECTION_CODES``)."""
