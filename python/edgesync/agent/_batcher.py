"""Journal rows → ``sync/rows/batch`` payloads.

Rows are read per table in ``commit_seq`` order after the table's publish cursor and
cut into batches of at most 4,096 rows and 512 KiB of JSON. The journal's ``pk_json``
and ``row_json`` texts are spliced into the payload as they are (SQLite produced them
with ``json_object``), so rows are never parsed in Python.

Before a batch is handed out it is recorded as *pending* in ``state.db``; until it is
confirmed, asking again rebuilds the very same batch (same ``batch_id``, same rows),
also after a crash and restart.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from edgesync.agent._state import PendingBatch, StateStore, TableState
from edgesync.agent._triggers import JOURNAL_TABLE, quote_ident
from edgesync.agent._uuid7 import uuid7

__all__ = [
    "CAPTURE_STRATEGY",
    "FORMAT_VERSION",
    "MAX_BATCH_BYTES",
    "MAX_BATCH_ROWS",
    "Batch",
    "Batcher",
    "JournalRow",
    "OversizedRowError",
    "encode_batch",
    "read_journal",
    "truncate_journal",
]

FORMAT_VERSION = 1
CAPTURE_STRATEGY = "sqlite_row_batch_v1"
MAX_BATCH_ROWS = 4096
MAX_BATCH_BYTES = 512 * 1024

_J = quote_ident(JOURNAL_TABLE)


@dataclass(frozen=True, slots=True)
class JournalRow:
    commit_seq: int
    op: bytes
    pk_json: bytes
    row_json: bytes | None

    def encode(self) -> bytes:
        return b'{"commit_seq":%d,"op":"%s","pk":%s,"row":%s}' % (
            self.commit_seq, self.op, self.pk_json,
            self.row_json if self.row_json is not None else b"null")


@dataclass(frozen=True, slots=True)
class Batch:
    pending: PendingBatch
    payload: bytes
    row_count: int


class OversizedRowError(Exception):
    """One journal row alone does not fit in a batch (needs the spill flow)."""

    def __init__(self, table: str, commit_seq: int, size: int) -> None:
        super().__init__(
            f"table {table!r}: journal row commit_seq={commit_seq} needs {size} bytes, "
            f"more than a batch may carry ({MAX_BATCH_BYTES}); publishing of this table "
            "is held until it can be sent")
        self.table, self.commit_seq, self.size = table, commit_seq, size


def read_journal(db: sqlite3.Connection, table: str, *, after: int, upto: int | None = None,
                 limit: int = MAX_BATCH_ROWS) -> list[JournalRow]:
    """Journal rows of ``table`` with ``after < commit_seq <= upto``, oldest first."""
    rows = db.execute(
        f"SELECT commit_seq, CAST(op AS BLOB), CAST(pk_json AS BLOB), CAST(row_json AS BLOB) "
        f"FROM {_J} WHERE table_name = ? AND commit_seq > ? AND commit_seq <= ? "
        f"ORDER BY commit_seq LIMIT ?",
        (table, after, upto if upto is not None else (1 << 63) - 1, limit)).fetchall()
    return [JournalRow(*r) for r in rows]


def truncate_journal(db: sqlite3.Connection, table: str, upto: int) -> int:
    """Delete journal rows of ``table`` with ``commit_seq <= upto``; returns how many."""
    db.execute("BEGIN IMMEDIATE")
    try:
        n = db.execute(f"DELETE FROM {_J} WHERE table_name = ? AND commit_seq <= ?",
                       (table, upto)).rowcount
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return n


def _prefix(p: PendingBatch) -> bytes:
    head = orjson.dumps({
        "format_version": FORMAT_VERSION,
        "capture_strategy": CAPTURE_STRATEGY,
        "batch_id": p.batch_id,
        "journal_epoch": p.journal_epoch,
        "source_table": p.source_table,
        "schema_hash": p.schema_hash,
    })[:-1]
    if p.schema_columns_json is not None:
        head += b',"schema_columns":' + p.schema_columns_json.encode()
    return head


def _frame(first: int, last: int) -> tuple[bytes, bytes]:
    return b',"first_commit_seq":%d,"last_commit_seq":%d,"rows":[' % (first, last), b"]}"


def encode_batch(p: PendingBatch, rows: Sequence[JournalRow]) -> bytes:
    """The JSON payload of ``p`` carrying ``rows`` (first/last taken from the rows)."""
    return _assemble(p, rows[0].commit_seq, rows[-1].commit_seq, [r.encode() for r in rows])


def _assemble(p: PendingBatch, first: int, last: int, encoded: Sequence[bytes]) -> bytes:
    mid, end = _frame(first, last)
    return b"".join((_prefix(p), mid, b",".join(encoded), end))


def _fit(prefix_len: int, rows: Sequence[JournalRow], encoded: Sequence[bytes],
         table: str) -> int:
    """How many leading ``rows`` fit in one batch (at least one, or OversizedRowError)."""
    first = rows[0].commit_seq
    body = 0
    count = 0
    for r, enc in zip(rows[:MAX_BATCH_ROWS], encoded, strict=False):
        size = len(enc)
        mid, end = _frame(first, r.commit_seq)
        total = prefix_len + len(mid) + body + (1 if count else 0) + size + len(end)
        if total > MAX_BATCH_BYTES:
            if count == 0:
                raise OversizedRowError(table, r.commit_seq, total)
            break
        body += size + (1 if count else 0)
        count += 1
    return count


class Batcher:
    """Builds the next batch of a table from the journal, persisting it as pending."""

    def __init__(self, source: sqlite3.Connection, state: StateStore) -> None:
        self._db = source
        self._state = state

    def journal_high_water(self) -> int:
        row = self._db.execute(f"SELECT max(commit_seq) FROM {_J}").fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def next_batch(self, table: str, *, upto: int | None = None) -> Batch | None:
        """The pending batch of ``table`` if there is one, else a new one of the rows
        after its cursor (``<= upto`` when given); None when nothing is to be sent."""
        pending = self._state.pending(table)
        if pending is not None:
            rows = read_journal(self._db, table, after=pending.first_commit_seq - 1,
                                upto=pending.last_commit_seq)
            if rows:
                return Batch(pending, encode_batch(pending, rows), len(rows))
            # Its rows were deleted by a progress control: the cloud has them.
            self._state.confirm(pending)
        ts: TableState | None = self._state.table(table)
        if ts is None or ts.paused or ts.schema_hash is None:
            return None
        rows = read_journal(self._db, table, after=ts.last_published_commit_seq, upto=upto)
        if not rows:
            return None
        probe = PendingBatch(table, uuid7(), ts.journal_epoch, 0, 0, ts.schema_hash,
                             None if ts.schema_sent else ts.schema_json)
        encoded = [r.encode() for r in rows]
        n = _fit(len(_prefix(probe)), rows, encoded, table)
        pending = PendingBatch(
            table, probe.batch_id, probe.journal_epoch, rows[0].commit_seq,
            rows[n - 1].commit_seq, probe.schema_hash, probe.schema_columns_json)
        self._state.save_pending(pending)
        payload = _assemble(pending, pending.first_commit_seq, pending.last_commit_seq,
                            encoded[:n])
        return Batch(pending, payload, n)
