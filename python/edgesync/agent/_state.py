"""``state.db``: the agent's own durable state, separate from the application database.

Per replicated table: the journal epoch (UUIDv7), the publish cursor
(``last_published_commit_seq``), the schema fingerprint, whether its ``schema_columns``
and its ``sync/schema/observe`` have been sent, and the pause state
(``paused``, ``server_watermark``). Per table at most one *pending* batch: its id and
journal range are written here before it is published, so a restart re-sends the same
``batch_id`` for the same rows. Also: journal ranges lost to ``local_retention_bytes``
(until reported). Other modules keep their own tables in the same file (the control
inbox, telemetry cursors, uploads, …); every table of the file is created by the one
versioned list of steps in ``_state_schema``, which opening the store runs.

The store is synchronous; the agent calls it from its single database thread.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from edgesync.agent._state_schema import migrate
from edgesync.errors import DeviceStateError
from edgesync.protocol import uuid7

__all__ = ["PendingBatch", "PublishedBatch", "StateStore", "TableState"]

@dataclass(frozen=True, slots=True)
class TableState:
    source_table: str
    journal_epoch: str
    last_published_commit_seq: int
    schema_hash: str | None
    schema_json: str | None
    schema_sent: bool
    paused: bool
    server_watermark: int | None
    observed_hash: str | None


@dataclass(frozen=True, slots=True)
class PendingBatch:
    """A batch chosen for publishing but not yet confirmed by a PUBACK."""

    source_table: str
    batch_id: str
    journal_epoch: str
    first_commit_seq: int
    last_commit_seq: int
    schema_hash: str
    schema_columns_json: str | None  # set when this batch carries ``schema_columns``
    # Unix ms at which the agent first saw the oldest change (``first_seen_at_ms``, not
    # stored: stamped each time the batch is built, from the journal polls' marks).
    first_seen_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class PublishedBatch:
    """A row batch the broker acknowledged, not yet confirmed by a progress control."""

    batch_id: str
    source_table: str
    journal_epoch: str
    first_commit_seq: int
    last_commit_seq: int
    published_at: float  # time.time()


class StateStore:
    def __init__(self, path: Path) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise DeviceStateError(f"cannot open state database {str(path)!r}: {exc}") from exc
        self.path = path
        try:
            self._db.execute("PRAGMA busy_timeout = 5000")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = FULL")
        except sqlite3.Error as exc:
            raise DeviceStateError(f"cannot prepare state database {str(path)!r}: {exc}") from exc
        migrate(self._db, path)

    # -- plumbing

    def _tx(self) -> _Tx:
        return _Tx(self._db)

    def close(self) -> None:
        self._db.close()

    @property
    def db(self) -> sqlite3.Connection:
        """The connection, for the modules that keep their own tables in this file."""
        return self._db

    def tx(self) -> _Tx:
        """``with state.tx():`` one ``BEGIN IMMEDIATE`` transaction."""
        return _Tx(self._db)

    def meta_int(self, key: str, default: int) -> int:
        row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return int(row[0]) if row is not None else default

    def set_meta(self, key: str, value: str) -> None:
        """Inside the caller's transaction (or autocommit)."""
        self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # -- wire bytes (the daily bandwidth budget, docs/agent.md)

    def bytes_spent(self) -> tuple[str, int]:
        """The last day counted and its bytes (``("", 0)`` before the first send)."""
        row = self._db.execute("SELECT day, bytes FROM wire_usage ORDER BY day DESC "
                               "LIMIT 1").fetchone()
        return (str(row[0]), int(row[1])) if row is not None else ("", 0)

    def add_bytes_sent(self, day: str, count: int) -> None:
        """Count ``count`` more bytes published on ``day``; earlier days are dropped."""
        with self._tx():
            self._db.execute("DELETE FROM wire_usage WHERE day < ?", (day,))
            self._db.execute("INSERT INTO wire_usage VALUES (?, ?) ON CONFLICT (day) DO "
                             "UPDATE SET bytes = bytes + excluded.bytes", (day, count))

    # -- journal identity

    def bind_journal(self, journal_id: str) -> bool:
        """Tie this state to the source database's journal instance.

        When the journal was rebuilt (its id changed), every table gets a new epoch, its
        cursor restarts at 0, its schema must be re-sent and pending batches are dropped.
        Returns True when such a reset happened.
        """
        with self._tx():
            row = self._db.execute("SELECT value FROM meta WHERE key='journal_id'").fetchone()
            if row is not None and row[0] == journal_id:
                return False
            for (table,) in self._db.execute("SELECT source_table FROM tables").fetchall():
                self._db.execute(
                    "UPDATE tables SET journal_epoch=?, last_published_commit_seq=0, "
                    "schema_sent=0, paused=0, server_watermark=NULL WHERE source_table=?",
                    (uuid7(), table))
            self._db.execute("DELETE FROM pending_batches")
            self._db.execute("DELETE FROM published_batches")
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('journal_id', ?)",
                             (journal_id,))
            return row is not None

    # -- tables

    def table(self, name: str) -> TableState | None:
        row = self._db.execute(
            "SELECT source_table, journal_epoch, last_published_commit_seq, schema_hash, "
            "schema_json, schema_sent, paused, server_watermark, observed_hash FROM tables "
            "WHERE source_table=?", (name,)).fetchone()
        if row is None:
            return None
        return TableState(row[0], row[1], row[2], row[3], row[4], bool(row[5]), bool(row[6]),
                          row[7], row[8])

    def tables(self) -> list[TableState]:
        names = [r[0] for r in self._db.execute("SELECT source_table FROM tables ORDER BY 1")]
        return [t for t in map(self.table, names) if t is not None]

    def ensure_table(self, name: str, schema_hash: str, schema_json: str) -> TableState:
        """Register ``name`` (new epoch on first sight) and record its current fingerprint.

        A fingerprint different from the stored one marks the schema as not yet sent, so
        the next batch carries ``schema_columns``.
        """
        with self._tx():
            self._db.execute(
                "INSERT INTO tables (source_table, journal_epoch, schema_hash, schema_json) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (source_table) DO UPDATE SET "
                "schema_sent = CASE WHEN schema_hash IS excluded.schema_hash "
                "                   THEN schema_sent ELSE 0 END, "
                "schema_hash = excluded.schema_hash, schema_json = excluded.schema_json",
                (name, uuid7(), schema_hash, schema_json))
        state = self.table(name)
        assert state is not None
        return state

    # -- pending batches

    def pending(self, table: str) -> PendingBatch | None:
        row = self._db.execute(
            "SELECT source_table, batch_id, journal_epoch, first_commit_seq, last_commit_seq, "
            "schema_hash, schema_columns_json FROM pending_batches WHERE source_table=?",
            (table,)).fetchone()
        return PendingBatch(*row) if row is not None else None

    def save_pending(self, batch: PendingBatch) -> None:
        """Durably record ``batch`` before it is published (one pending batch per table)."""
        with self._tx():
            self._db.execute(
                "INSERT OR REPLACE INTO pending_batches VALUES (?, ?, ?, ?, ?, ?, ?)",
                (batch.source_table, batch.batch_id, batch.journal_epoch,
                 batch.first_commit_seq, batch.last_commit_seq, batch.schema_hash,
                 batch.schema_columns_json))

    def confirm(self, batch: PendingBatch, published_at: float | None = None) -> None:
        """The broker acknowledged ``batch``: advance the cursor and forget the pending row.

        With ``published_at`` the batch is remembered as published until a progress
        control confirms it (``batch_committed``) or ``confirm_timeout`` re-sends it
        (``rewind_unconfirmed``). A no-op when the pending row is gone: a
        ``resume_lineage`` (which rewinds the cursor) or a progress control got there
        while the batch was in flight.
        """
        with self._tx():
            if self._advance(batch) and published_at is not None:
                self._db.execute(
                    "INSERT OR REPLACE INTO published_batches VALUES (?, ?, ?, ?, ?, ?)",
                    (batch.batch_id, batch.source_table, batch.journal_epoch,
                     batch.first_commit_seq, batch.last_commit_seq, published_at))

    def _advance(self, batch: PendingBatch) -> bool:
        """Inside a transaction: move the cursor past pending ``batch``; False when it is
        no longer the pending batch."""
        n = self._db.execute(
            "UPDATE tables SET last_published_commit_seq = "
            "  max(last_published_commit_seq, ?), "
            "schema_sent = CASE WHEN ? AND schema_hash IS ? THEN 1 ELSE schema_sent END "
            "WHERE source_table=? AND journal_epoch=? AND EXISTS (SELECT 1 FROM "
            "pending_batches p WHERE p.source_table=? AND p.batch_id=?)",
            (batch.last_commit_seq, batch.schema_columns_json is not None,
             batch.schema_hash, batch.source_table, batch.journal_epoch,
             batch.source_table, batch.batch_id)).rowcount
        self._db.execute(
            "DELETE FROM pending_batches WHERE source_table=? AND batch_id=?",
            (batch.source_table, batch.batch_id))
        return n > 0

    def advance_cursor(self, table: str, epoch: str, to: int) -> None:
        """Nothing up to ``to`` is published as batches (it travels by upload)."""
        with self._tx():
            self._db.execute(
                "UPDATE tables SET last_published_commit_seq = max(last_published_commit_seq, "
                "?) WHERE source_table=? AND journal_epoch=?", (to, table, epoch))

    # -- published batches awaiting the cloud's progress control

    def published(self, batch_id: str) -> PublishedBatch | None:
        row = self._db.execute(
            "SELECT batch_id, source_table, journal_epoch, first_commit_seq, "
            "last_commit_seq, published_at FROM published_batches WHERE batch_id=?",
            (batch_id,)).fetchone()
        return PublishedBatch(*row) if row is not None else None

    def published_batches(self, table: str) -> list[PublishedBatch]:
        return [PublishedBatch(*r) for r in self._db.execute(
            "SELECT batch_id, source_table, journal_epoch, first_commit_seq, "
            "last_commit_seq, published_at FROM published_batches WHERE source_table=? "
            "ORDER BY first_commit_seq", (table,))]

    def batch_committed(self, table: str, batch_id: str) -> None:
        """The cloud committed ``batch_id``: forget it (also when its PUBACK is still
        outstanding, i.e. it is the pending batch)."""
        with self._tx():
            self._db.execute("DELETE FROM published_batches WHERE batch_id=?", (batch_id,))
            pending = self.pending(table)
            if pending is not None and pending.batch_id == batch_id:
                self._advance(pending)

    def rewind_unconfirmed(self, table: str, published_before: float) -> int | None:
        """Re-send what the cloud has not confirmed in time: when a published batch of
        ``table`` is older than ``published_before``, move the cursor to just before the
        earliest unconfirmed range and forget the batches it re-covers (they are rebuilt
        from the journal under new ids). Returns the new cursor, or None."""
        with self._tx():
            row = self._db.execute(
                "SELECT min(first_commit_seq) FROM published_batches WHERE source_table=? "
                "AND published_at < ?", (table, published_before)).fetchone()
            if row is None or row[0] is None:
                return None
            start = int(row[0]) - 1
            self._db.execute(
                "DELETE FROM published_batches WHERE source_table=? AND last_commit_seq > ?",
                (table, start))
            self._db.execute("DELETE FROM pending_batches WHERE source_table=?", (table,))
            self._db.execute(
                "UPDATE tables SET last_published_commit_seq = "
                "min(last_published_commit_seq, ?) WHERE source_table=?", (start, table))
            return start

    def record_progress(self, table: str, committed_commit_seq: int) -> None:
        """The cloud committed everything up to ``committed_commit_seq``: nothing up to it
        needs publishing again."""
        with self._tx():
            self._db.execute(
                "UPDATE tables SET last_published_commit_seq = "
                "  max(last_published_commit_seq, ?) WHERE source_table=?",
                (committed_commit_seq, table))
            self._db.execute(
                "DELETE FROM pending_batches WHERE source_table=? AND last_commit_seq <= ?",
                (table, committed_commit_seq))
            self._db.execute(
                "DELETE FROM published_batches WHERE source_table=? AND last_commit_seq <= ?",
                (table, committed_commit_seq))

    # -- pause / resume (downlink controls)

    def pause(self, table: str, server_watermark: int | None) -> bool:
        """Stop publishing ``table``; False when the table is unknown."""
        with self._tx():
            return self._db.execute(
                "UPDATE tables SET paused=1, server_watermark=coalesce(?, server_watermark) "
                "WHERE source_table=?", (server_watermark, table)).rowcount > 0

    def resume(self, table: str, server_watermark: int | None) -> bool:
        """Publish ``table`` again from ``server_watermark + 1``.

        The cursor is rewound (or advanced) to the watermark and the pending batch is
        forgotten, so everything after the watermark is rebuilt under new batch ids:
        the cloud may have recorded the old ids while it was dropping their rows.
        """
        with self._tx():
            n = self._db.execute(
                "UPDATE tables SET paused=0, "
                "server_watermark=coalesce(?, server_watermark), "
                "last_published_commit_seq=coalesce(?, server_watermark, "
                "  last_published_commit_seq) WHERE source_table=?",
                (server_watermark, server_watermark, table)).rowcount
            if n:
                self._db.execute("DELETE FROM pending_batches WHERE source_table=?", (table,))
                self._db.execute(  # rebuilt from the watermark under new ids
                    "DELETE FROM published_batches WHERE source_table=? AND last_commit_seq > "
                    "(SELECT last_published_commit_seq FROM tables WHERE source_table=?)",
                    (table, table))
            return n > 0

    def forget(self, table: str) -> bool:
        """The cloud deleted the table's lineage (``forget_lineage``): publish it again
        as if new — not paused, no watermark, the schema sent (and observed) again, the
        cursor back to the start so every journal row still held goes again under new
        batch ids, no pending or published batch awaiting a confirmation that cannot
        come. False when the table is unknown."""
        with self._tx():
            n = self._db.execute(
                "UPDATE tables SET paused=0, server_watermark=NULL, schema_sent=0, "
                "observed_hash=NULL, last_published_commit_seq=0 WHERE source_table=?",
                (table,)).rowcount
            if n:
                self._db.execute("DELETE FROM pending_batches WHERE source_table=?", (table,))
                self._db.execute("DELETE FROM published_batches WHERE source_table=?",
                                 (table,))
            return n > 0

    def mark_observed(self, table: str, schema_hash: str) -> None:
        with self._tx():
            self._db.execute("UPDATE tables SET observed_hash=? WHERE source_table=?",
                             (schema_hash, table))

    # -- journal ranges lost to local_retention_bytes

    def record_gap(self, table: str, epoch: str, first: int, last: int, at: str) -> None:
        """Inside the caller's transaction: remember a dropped range and skip past it."""
        self._db.execute(
            "INSERT INTO gaps (source_table, journal_epoch, first_commit_seq, "
            "last_commit_seq, recorded_at) VALUES (?, ?, ?, ?, ?)",
            (table, epoch, first, last, at))
        self._db.execute(
            "UPDATE tables SET last_published_commit_seq = max(last_published_commit_seq, ?) "
            "WHERE source_table=? AND journal_epoch=?", (last, table, epoch))
        self._db.execute(
            "DELETE FROM pending_batches WHERE source_table=? AND first_commit_seq <= ?",
            (table, last))
        self._db.execute(
            "DELETE FROM published_batches WHERE source_table=? AND last_commit_seq <= ?",
            (table, last))

    def unreported_gaps(self) -> list[tuple[int, str, str, int, int]]:
        return [tuple(r) for r in self._db.execute(
            "SELECT gap_id, source_table, journal_epoch, first_commit_seq, last_commit_seq "
            "FROM gaps WHERE reported=0 ORDER BY gap_id")]

    def gap_reported(self, gap_id: int) -> None:
        with self._tx():
            self._db.execute("UPDATE gaps SET reported=1 WHERE gap_id=?", (gap_id,))


class _Tx:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on error) on an autocommit connection."""

    __slots__ = ("_db",)

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._db.execute("ROLLBACK" if exc_type is not None else "COMMIT")
