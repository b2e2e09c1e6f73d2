"""Type stubs of the Rust extension ``edgesync._core`` (checked by mypy.stubtest)."""

from collections.abc import Sequence
from os import PathLike
from typing import final

from typing_extensions import disjoint_base

__all__ = [
    "MAX_BATCH_BYTES",
    "MAX_BATCH_ROWS",
    "REJECTION_CODES",
    "ROW_CAPTURE_STRATEGY",
    "SUPPORTED_FORMAT_VERSION",
    "TELEMETRY_CAPTURE_STRATEGY",
    "ZSTD_MAGIC",
    "Envelope",
    "JournalReader",
    "JournalRow",
    "RowBatch",
    "RowEncoder",
    "TelemetryBatch",
    "__version__",
    "compress_blob",
    "decode_row_batch",
    "decode_telemetry_batch",
    "decompress_blob",
    "heap_purge_delay",
    "inflate_batch",
    "pk_hash",
    "schema_fingerprint",
    "set_heap_purge_delay",
    "sqlite_affinity",
]

__version__: str

MAX_BATCH_ROWS: int
"""Largest number of rows a batch may carry (4096)."""

MAX_BATCH_BYTES: int
"""Largest MQTT batch payload in bytes (512 KiB)."""

SUPPORTED_FORMAT_VERSION: int
"""The one payload ``format_version`` this build understands (1)."""

ROW_CAPTURE_STRATEGY: str
"""The ``capture_strategy`` of row batches (``sqlite_row_batch_v1``)."""

TELEMETRY_CAPTURE_STRATEGY: str
"""The ``capture_strategy`` of telemetry batches (``sqlite_telemetry_batch_v1``)."""

ZSTD_MAGIC: bytes
"""The first four bytes of a zstd frame: a batch payload starting with them is a
compressed batch (docs/protocol.md), inflated by ``inflate_batch``."""

REJECTION_CODES: tuple[str, ...]
"""Every rejection code the decoders and COPY encoders raise (``BatchRejected.code``), in
the order the checks run; ``edgesync.protocol.RejectionCode`` holds them and the codes
the Python pipeline adds."""

def sqlite_affinity(declared_type: str) -> str:
    """SQLite column affinity (INTEGER, TEXT, BLOB, REAL, NUMERIC) of a declared type."""

def schema_fingerprint(
    table_name: str, columns: Sequence[tuple[str, str, int, bool]]
) -> tuple[str, str]:
    """Fingerprint of a table: ``(schema_hash, canonical_json)``.

    ``columns`` holds ``(name, declared_type, pk_ordinal, not_null)``; the declared
    type is reduced to its affinity, so affinity names may be passed as well.
    Raises SchemaError for duplicate or empty column names or a bad pk_ordinal.
    """

def pk_hash(pk_json: bytes | bytearray | memoryview) -> str:
    """``source_pk_hash``: SHA-256 hex of the canonical form of a ``pk`` JSON object.

    Raises BatchRejected (``malformed_json``, ``invalid_number_encoding``, or
    ``invalid_row`` with field ``pk`` when it is not a non-empty object).
    """

def compress_blob(data: bytes | bytearray | memoryview, level: int = 3) -> bytes:
    """zstd frame (with content size and checksum) of ``data``; releases the GIL.

    BlobError if ``level`` is outside zstd's range.
    """

def heap_purge_delay() -> int:
    """Milliseconds the extension's allocator (mimalloc) keeps freed pages resident
    before giving them back to the system."""

def set_heap_purge_delay(ms: int) -> None:
    """Set ``heap_purge_delay``: 0 gives freed pages back at once, -1 never.

    ValueError below -1.
    """

def decompress_blob(data: bytes | bytearray | memoryview, max_size: int = 1 << 31) -> bytes:
    """Inverse of compress_blob; BlobError if corrupt or larger than ``max_size``.

    Accepts any zstd frame(s), including streaming frames without a content
    size; truncated input and trailing garbage are errors. Releases the GIL.
    """

def inflate_batch(
    payload: bytes | bytearray | memoryview, max_payload_bytes: int | None = None
) -> bytes:
    """The JSON of a compressed batch (one zstd frame), inflated with the GIL released.

    Bounded by ``max_payload_bytes`` (``MAX_BATCH_BYTES`` by default): a frame that would
    inflate past it raises BatchRejected ``payload_too_large`` without the output being
    allocated whole; a corrupt or truncated frame raises ``malformed_json``.
    """

@disjoint_base
class Envelope:
    """The fields every validated batch carries: the base of RowBatch and TelemetryBatch
    (not constructible; the decoders return its subclasses)."""

    @property
    def format_version(self) -> int: ...
    @property
    def capture_strategy(self) -> str: ...
    @property
    def batch_id(self) -> str: ...
    @property
    def source_table(self) -> str: ...
    @property
    def schema_hash(self) -> str: ...
    @property
    def schema_columns_json(self) -> bytes | None:
        """The ``schema_columns`` object re-serialized canonically, when present."""
    @property
    def first_seen_at_ms(self) -> int | None:
        """Unix milliseconds at which the agent first saw the batch's oldest change
        (the optional ``first_seen_at_ms`` field), or None."""
    @property
    def payload_size(self) -> int: ...
    @property
    def row_count(self) -> int: ...

@final
class RowBatch(Envelope):
    """A validated ``sync/rows/batch`` payload, kept in Rust memory (read-only)."""

    @property
    def journal_epoch(self) -> str: ...
    @property
    def first_commit_seq(self) -> int: ...
    @property
    def last_commit_seq(self) -> int: ...
    def lkcv_rows(self) -> list[tuple[str, int, int]]:
        """``(pk_hash, commit_seq, lkcv)`` of the rows carrying an ``lkcv``."""

    def select(self, indices: Sequence[int]) -> RowBatch:
        """The batch with only the rows at ``indices``, in that order (per-row
        quarantine writes the others): the envelope unchanged, ``first_commit_seq`` /
        ``last_commit_seq`` the bounds of the rows kept. ValueError when an index is out
        of range or none is given."""

    def row_at(self, index: int) -> tuple[int, str, str, str]:
        """``(commit_seq, op, pk_hash, row_json)`` of row ``index``: ``row_json`` is the
        row object (``commit_seq``, ``op``, ``pk``, ``row``, ``lkcv`` when present) with
        its values as the payload wrote them. IndexError out of range."""

    def column_names(self) -> list[str]:
        """Union of the keys of every ``row`` and ``pk`` object, in first-seen order.

        Rows are visited in order; for each, the ``row`` keys come before the ``pk`` keys.
        """

    @property
    def keys_are_unique(self) -> bool:
        """True when no two row ops share a primary key."""

    def encode_state_copy(
        self, columns: Sequence[tuple[str, str]], *, binary: bool = False,
        device_id: str | None = None,
    ) -> bytes:
        """Rows as PostgreSQL COPY text format, one line per row op, releasing the GIL.

        With ``binary``: COPY binary format, the same rows, values and errors, each
        field in its type's wire form (platform fields ``text``, ``uuid``, ``bigint``,
        ``boolean``); ``numeric`` has no binary encoding here (SchemaError).

        ``columns`` is ``(source_column, pg_type)`` with pg_type one of ``bigint``,
        ``double precision``, ``text``, ``bytea``, ``numeric``, ``jsonb``, ``boolean``.
        Each line: [device_id,] pk_hash, journal_epoch, commit_seq, deleted (t/f), then
        one field per requested column (from ``row``; from ``pk`` for deletes; NULL when
        absent). Raises BatchRejected(code="value_type_mismatch") naming the column
        and commit_seq when a value cannot be written as its pg_type (field
        ``rows[i].row.<column>``, or ``rows[i].pk.<column>`` for deletes),
        SchemaError for an unknown pg_type, ValueError when ``device_id`` (given:
        every row starts with it, so batches of many devices share one COPY) is not
        a hyphenated UUID.
        """

def decode_row_batch(
    payload: bytes | bytearray | memoryview, max_payload_bytes: int | None = None
) -> RowBatch:
    """Decode and validate a row batch, releasing the GIL; raises BatchRejected.

    ``max_payload_bytes`` overrides the 512 KiB MQTT limit (chunks cut from uploaded
    objects may carry one larger row).

    Never raises anything else for any payload bytes.
    """

@final
class TelemetryBatch(Envelope):
    """A validated ``sync/telemetry/batch`` payload, kept in Rust memory (read-only)."""

    @property
    def batch_seq(self) -> int: ...
    @property
    def cursor_start_ts(self) -> str:
        """As sent (equal, as an instant, to the earliest row ``ts``)."""
    @property
    def cursor_end_ts(self) -> str:
        """As sent (equal, as an instant, to the latest row ``ts``)."""
    @property
    def first_event_ts(self) -> str:
        """Earliest row ``ts``: ISO 8601 UTC with microseconds (``datetime.fromisoformat``)."""
    @property
    def last_event_ts(self) -> str:
        """Latest row ``ts``: ISO 8601 UTC with microseconds."""
    def field_names(self) -> list[str]:
        """Union of the keys of every row's ``fields``, in first-seen order."""

    def select(self, indices: Sequence[int]) -> TelemetryBatch:
        """The batch with only the rows at ``indices``, in that order: ``first_event_ts``
        / ``last_event_ts`` the bounds of the rows kept, the cursor fields as sent.
        ValueError when an index is out of range or none is given."""

    def row_at(self, index: int) -> tuple[str, str | None, str]:
        """``(event_ts, row_id, row_json)`` of row ``index``: ``event_ts`` ISO 8601 UTC with
        microseconds, ``row_json`` the row object (``ts``, ``row_id``, ``fields``) with its
        field values as the payload wrote them. IndexError out of range."""

    def encode_telemetry_copy(
        self,
        columns: Sequence[tuple[str, str]],
        device_id: str | None = None,
        *,
        binary: bool = False,
    ) -> bytes:
        """Rows as PostgreSQL COPY text format, one line per row, releasing the GIL.

        With ``binary``: COPY binary format, the same rows, values and errors
        (``device_id``/``row_id`` as ``uuid``, ``event_ts`` as ``timestamptz``);
        ``numeric`` has no binary encoding here (SchemaError).

        Each line: ``device_id`` (when given), ``event_ts`` (UTC, microseconds,
        truncated), ``row_id`` (NULL when absent), then one field per
        ``(field, pg_type)`` column taken from ``fields`` with the value rules of
        ``RowBatch.encode_state_copy`` (absent or JSON null → NULL). Raises
        BatchRejected(code="value_type_mismatch", field ``rows[i].fields.<column>``),
        SchemaError for an unknown pg_type, ValueError when ``device_id`` is not a UUID.
        """

def decode_telemetry_batch(payload: bytes | bytearray | memoryview) -> TelemetryBatch:
    """Decode and validate a telemetry batch, releasing the GIL; raises BatchRejected.

    Codes, first failure wins: payload_too_large, malformed_json,
    invalid_number_encoding, envelope_unstripped_tenant_fields,
    invalid_format_version / unsupported_format_version, unsupported_capture_strategy
    (``sqlite_telemetry_batch_v1``), invalid_batch_id, invalid_batch_seq,
    invalid_source_table, invalid_schema_hash, invalid_rows / batch_too_many_rows,
    row_count_mismatch, invalid_row / invalid_row_id (first bad row),
    cursor_timestamp_mismatch, invalid_schema_columns / schema_hash_mismatch.
    Never raises anything else for any payload bytes.
    """

@final
class JournalRow:
    """One journal entry of a row batch: its ``commit_seq`` and its row JSON
    (``{"commit_seq":…,"op":…,"pk":{…},"row":{…}|null}``), None when the table row is
    gone (a later journal entry of the key carries its final state)."""

    def __new__(cls, commit_seq: int, encoded: bytes | None) -> JournalRow: ...
    @property
    def commit_seq(self) -> int: ...
    @property
    def encoded(self) -> bytes | None: ...

@final
class RowEncoder:
    """Writes the batch entries of one table from rows fetched by Python's sqlite3.

    ``pk_names`` are the primary-key columns in key order, ``row_names`` every column in
    table order. Each row tuple is ``(commit_seq, op, *pk_values, *row_values, ...)``;
    an entry whose op is not ``delete`` and whose value at ``live_index`` is None is
    gone (``encoded`` None). Deletes carry ``"row":null``. Values: int, str (JSON
    string), float (shortest text that reads back exactly; ±inf as null), bytes
    (``{"$blob":"<UPPERCASE HEX>"}``), None. ValueError when ``live_index`` < 2 or a
    tuple is too short, TypeError for any other value type.
    """

    def __new__(
        cls, pk_names: Sequence[str], row_names: Sequence[str], live_index: int
    ) -> RowEncoder: ...
    def encode_rows(self, rows: list[tuple[object, ...]]) -> list[JournalRow]:
        """One JournalRow per row tuple, in order (holds the GIL: it reads the tuples)."""

@final
class JournalReader:
    """A read-only connection of Rust to the SQLite file ``path`` that builds pages of
    JournalRows without a Python object per value (entries byte-identical to
    ``RowEncoder.encode_rows`` of the same rows; TEXT that is not UTF-8 gets U+FFFD).

    SQLite is found through ``library``, the file of the loaded ``_sqlite3`` module (None:
    the running program), so it is the very library Python's ``sqlite3`` uses. Raises
    ``sqlite3.OperationalError`` when SQLite or the database cannot be had. Reads release
    the GIL; one read runs at a time.
    """

    def __new__(
        cls, library: str | PathLike[str] | None, path: str | PathLike[str], busy_timeout_ms: int
    ) -> JournalReader: ...
    @property
    def sqlite_version_number(self) -> int:
        """``sqlite3_libversion_number()`` of the library in use, e.g. 3040001."""
    def read(
        self, sql: str, encoder: RowEncoder, table: str, after: int, upto: int, limit: int
    ) -> list[JournalRow]:
        """The JournalRows of ``sql`` (parameters: table, after, upto, limit; columns as
        ``RowEncoder.encode_rows`` takes them), oldest first. ``sqlite3.OperationalError``
        on a SQLite failure, ValueError once closed."""
    def scan(self, sql: str, table: str, after: int, upto: int, limit: int) -> tuple[int, int]:
        """Steps ``sql`` as ``read`` does and reads every value, writing no JSON (what
        SQLite alone costs): (rows, last commit_seq, or ``after`` when none)."""
    def close(self) -> None:
        """Closes the connection; later reads raise ValueError."""
