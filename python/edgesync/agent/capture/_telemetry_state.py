"""Telemetry tables in ``state.db``: cursor, sent keys, ``batch_seq`` and the outbox.

Per table: ``next_batch_seq``, the cursor (largest timestamp sent, in microseconds, and
the key of that row), the keys of the rows sent whose timestamp lies inside the
look-back window behind the cursor (so a late row is sent once, and a row already sent
is never sent again), and every batch built but not yet committed by the cloud (the
*outbox*). A batch is written to the outbox in the same transaction that advances the
cursor and ``batch_seq``, so after a crash it is re-published byte for byte (same
``batch_id``, same ``batch_seq``) instead of being rebuilt.

For a table with a rowid (not ``WITHOUT ROWID``) it also keeps a rowid *high-water
mark* (``telemetry_rowid``): every row with a rowid at or below it has been sent (or
was there before capture started, or cannot be sent); it advances in the transaction
that stores the batch. NULL: no row is covered yet (a table read from its first row).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from edgesync.agent._state import StateStore

__all__ = ["OutboxBatch", "TelemetryState", "TelemetryTableState"]


@dataclass(frozen=True, slots=True)
class TelemetryTableState:
    source_table: str
    next_batch_seq: int
    cursor_ts_us: int | None
    cursor_key: str | None
    schema_hash: str | None
    schema_json: str | None
    schema_sent: bool
    observed_hash: str | None
    paused: bool
    server_watermark: int | None


@dataclass(frozen=True, slots=True)
class OutboxBatch:
    source_table: str
    batch_seq: int
    batch_id: str
    payload: bytes
    row_count: int


class TelemetryState:
    def __init__(self, state: StateStore) -> None:
        self._state = state
        self._db = state.db

    def table(self, name: str) -> TelemetryTableState | None:
        row = self._db.execute(
            "SELECT source_table, next_batch_seq, cursor_ts_us, cursor_key, schema_hash, "
            "schema_json, schema_sent, observed_hash, paused, server_watermark "
            "FROM telemetry WHERE source_table=?", (name,)).fetchone()
        if row is None:
            return None
        return TelemetryTableState(row[0], row[1], row[2], row[3], row[4], row[5],
                                   bool(row[6]), row[7], bool(row[8]), row[9])

    def tables(self) -> list[str]:
        return [r[0] for r in self._db.execute(
            "SELECT source_table FROM telemetry ORDER BY 1")]

    def ensure(self, name: str, schema_hash: str, schema_json: str, *,
               start: tuple[int, str] | None, seen: Iterable[tuple[str, int]],
               high_water: tuple[int | None] | None = None) -> bool:
        """Register ``name`` (True when new) and record its fingerprint.

        A new table starts at ``start`` (None: from its first row) with ``seen`` (key,
        ts) marked as already sent and, when given as ``(value,)``, that rowid
        high-water mark; a known table keeps its cursor.
        """
        with self._state.tx():
            new = self._db.execute(
                "INSERT INTO telemetry (source_table, cursor_ts_us, cursor_key, schema_hash, "
                "schema_json) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (name, start[0] if start else None, start[1] if start else None,
                 schema_hash, schema_json)).rowcount > 0
            if new:
                self._db.executemany(
                    "INSERT OR IGNORE INTO telemetry_sent VALUES (?, ?, ?)",
                    ((name, key, ts) for key, ts in seen))
                if high_water is not None:
                    self._db.execute("INSERT OR REPLACE INTO telemetry_rowid VALUES (?, ?)",
                                     (name, high_water[0]))
            else:
                self._db.execute(
                    "UPDATE telemetry SET schema_sent = CASE WHEN schema_hash IS ? "
                    "THEN schema_sent ELSE 0 END, schema_hash=?, schema_json=? "
                    "WHERE source_table=?", (schema_hash, schema_hash, schema_json, name))
        return new

    def high_water(self, name: str) -> tuple[bool, int | None]:
        """(whether ``name`` has a rowid high-water mark, its value)."""
        row = self._db.execute("SELECT high_water FROM telemetry_rowid WHERE source_table=?",
                               (name,)).fetchone()
        return (False, None) if row is None else (True, row[0])

    def set_high_water(self, name: str, value: int | None) -> None:
        with self._state.tx():
            self._db.execute("INSERT OR REPLACE INTO telemetry_rowid VALUES (?, ?)",
                             (name, value))

    def sent_keys(self, name: str) -> set[str]:
        return {r[0] for r in self._db.execute(
            "SELECT row_key FROM telemetry_sent WHERE source_table=?", (name,))}

    def sent(self, name: str) -> dict[str, int]:
        """Key -> timestamp (µs) of the rows sent inside the look-back window."""
        return {r[0]: r[1] for r in self._db.execute(
            "SELECT row_key, ts_us FROM telemetry_sent WHERE source_table=?", (name,))}

    def save_batch(self, batch: OutboxBatch, *, cursor: tuple[int, str], with_schema: bool,
                   sent: Iterable[tuple[str, int]], keep_from_us: int,
                   high_water: tuple[int | None] | None = None) -> None:
        """One transaction: outbox row, ``batch_seq``, cursor, sent keys (pruned to the
        window starting at ``keep_from_us``) and, when given as ``(value,)``, the rowid
        high-water mark."""
        name = batch.source_table
        with self._state.tx():
            self._db.execute(
                "INSERT INTO telemetry_outbox (source_table, batch_seq, batch_id, payload, "
                "row_count) VALUES (?, ?, ?, ?, ?)",
                (name, batch.batch_seq, batch.batch_id, batch.payload, batch.row_count))
            self._db.execute(
                "UPDATE telemetry SET next_batch_seq=?, cursor_ts_us=?, cursor_key=?, "
                "schema_sent = schema_sent OR ? WHERE source_table=?",
                (batch.batch_seq + 1, cursor[0], cursor[1], with_schema, name))
            self._db.executemany("INSERT OR REPLACE INTO telemetry_sent VALUES (?, ?, ?)",
                                 ((name, key, ts) for key, ts in sent))
            self._db.execute("DELETE FROM telemetry_sent WHERE source_table=? AND ts_us < ?",
                             (name, keep_from_us))
            if high_water is not None:
                self._db.execute("INSERT OR REPLACE INTO telemetry_rowid VALUES (?, ?)",
                                 (name, high_water[0]))

    def unpublished(self, name: str, limit: int = -1) -> list[OutboxBatch]:
        """The table's unpublished batches in order (the first ``limit``; -1: all)."""
        return [OutboxBatch(*r) for r in self._db.execute(
            "SELECT source_table, batch_seq, batch_id, payload, row_count FROM "
            "telemetry_outbox WHERE source_table=? AND published=0 ORDER BY batch_seq "
            "LIMIT ?", (name, limit))]

    def published(self, batch: OutboxBatch, at: float | None = None) -> None:
        """The broker took ``batch`` (at ``at``, ``time.time()``); it stays in the outbox
        until a progress control confirms it."""
        with self._state.tx():
            self._db.execute("UPDATE telemetry_outbox SET published=1, published_at=? "
                             "WHERE source_table=? AND batch_seq=?",
                             (at, batch.source_table, batch.batch_seq))

    def committed_batches(self, name: str, batch_ids: Iterable[str]) -> int:
        """The cloud committed these batches of ``name``: drop them."""
        with self._state.tx():
            return sum(self._db.execute(
                "DELETE FROM telemetry_outbox WHERE source_table=? AND batch_id=?",
                (name, batch_id)).rowcount for batch_id in batch_ids)

    def republish_unconfirmed(self, name: str, published_before: float) -> int:
        """Mark batches published before ``published_before`` and still unconfirmed for
        publishing again (same ``batch_id`` and ``batch_seq``); not while paused."""
        with self._state.tx():
            return self._db.execute(
                "UPDATE telemetry_outbox SET published=0 WHERE source_table=? AND "
                "published=1 AND published_at < ? AND NOT (SELECT paused FROM telemetry "
                "WHERE source_table=?)", (name, published_before, name)).rowcount

    def committed(self, name: str, batch_seq: int) -> int:
        """The cloud committed ``name`` up to ``batch_seq``: drop those batches."""
        with self._state.tx():
            return self._db.execute(
                "DELETE FROM telemetry_outbox WHERE source_table=? AND batch_seq <= ?",
                (name, batch_seq)).rowcount

    def pause(self, name: str, watermark: int | None) -> bool:
        with self._state.tx():
            return self._db.execute(
                "UPDATE telemetry SET paused=1, server_watermark=coalesce(?, "
                "server_watermark) WHERE source_table=?", (watermark, name)).rowcount > 0

    def resume(self, name: str, watermark: int | None) -> bool:
        """Publish again; buffered batches after the watermark are re-published in
        ``batch_seq`` order (same ids: the cloud dedupes on ``batch_id``)."""
        with self._state.tx():
            n = self._db.execute(
                "UPDATE telemetry SET paused=0, server_watermark=coalesce(?, "
                "server_watermark) WHERE source_table=?", (watermark, name)).rowcount
            if n:  # without a watermark in the control, the one stored at pause
                self._db.execute(
                    "UPDATE telemetry_outbox SET published=0 WHERE source_table=? AND "
                    "batch_seq > (SELECT server_watermark FROM telemetry WHERE "
                    "source_table=?)", (name, name))
            return n > 0

    def forget(self, name: str) -> bool:
        """The cloud deleted the table's lineage: not paused, no watermark, the schema
        sent (and observed) again, every buffered batch re-published (the cloud's
        ledger of them is gone with the lineage, so none is a duplicate there). The read
        cursor stays: rows already sent were kept in the telemetry table."""
        with self._state.tx():
            n = self._db.execute(
                "UPDATE telemetry SET paused=0, server_watermark=NULL, schema_sent=0, "
                "observed_hash=NULL WHERE source_table=?", (name,)).rowcount
            if n:
                self._db.execute("UPDATE telemetry_outbox SET published=0 "
                                 "WHERE source_table=?", (name,))
            return n > 0

    def mark_observed(self, name: str, schema_hash: str) -> None:
        with self._state.tx():
            self._db.execute("UPDATE telemetry SET observed_hash=? WHERE source_table=?",
                             (schema_hash, name))

    def trim_published(self, name: str, keep_bytes: int) -> int:
        """Forget the oldest *published* batches beyond ``keep_bytes`` of outbox (they
        reached the broker; only a later resume could have wanted them again)."""
        rows = self._db.execute(
            "SELECT batch_seq, length(payload) FROM telemetry_outbox WHERE source_table=? "
            "ORDER BY batch_seq DESC", (name,)).fetchall()
        total, cut = 0, None
        for seq, size in rows:
            total += size
            if total > keep_bytes:
                cut = seq
                break
        if cut is None:
            return 0
        with self._state.tx():
            return self._db.execute(
                "DELETE FROM telemetry_outbox WHERE source_table=? AND batch_seq <= ? "
                "AND published=1", (name, cut)).rowcount
