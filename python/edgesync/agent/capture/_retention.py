"""``local_retention_bytes``: bound the journal, and never lose rows without saying so.

The journal is measured as the estimated bytes of its rows (a fixed overhead plus the
table name, the op and the key values), per table, incrementally: the agent adds what
was journaled since its last look and subtracts what it deletes. When the total
exceeds the limit, the oldest rows of the largest table are dropped until the journal
is back under 90 % of the limit. Each dropped range is first recorded in ``state.db``
(table, journal epoch, first and last ``commit_seq``) together with moving the
table's cursor past it, then deleted, logged as an error, and reported to the cloud
on ``sync/ingest/request`` as a ``gap_report``. Nothing is dropped silently; the
reported range may include rows the cloud had already received but not yet confirmed.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime

from edgesync.agent._state import StateStore
from edgesync.agent.capture._batcher import truncate_journal
from edgesync.agent.capture._triggers import JOURNAL_TABLE, key_column, quote_ident

__all__ = ["JournalBudget"]

log = logging.getLogger("edgesync.agent")

_J = quote_ident(JOURNAL_TABLE)
_ROW_OVERHEAD = 24  # rowid, record header, b-tree cell: an estimate, not a measurement
_TARGET = 0.9


class JournalBudget:
    def __init__(self, source: sqlite3.Connection, state: StateStore, limit: int, *,
                 reserved: Callable[[str, str], list[tuple[int, int]]] | None = None) -> None:
        self._db = source
        self._state = state
        self.limit = limit
        # Ranges that travel by upload (a re-seed, a spill) are never dropped: dropping a
        # re-seed would only cause another gap and another re-seed.
        self._reserved = reserved
        self.bytes: dict[str, int] = {}
        self._seen_upto = 0

    def _size_sql(self, width: int) -> str:
        keys = " + ".join(f"coalesce(length({key_column(i)}), 0)" for i in range(width))
        return f"{_ROW_OVERHEAD} + length(table_name) + length(op) + {keys}"

    def _width(self) -> int:
        cols = [r[1] for r in self._db.execute(f"PRAGMA table_info({_J})")]
        return sum(1 for c in cols if c.startswith("k") and c[1:].isdigit())

    def observe(self) -> None:
        """Add the rows journaled since the last call."""
        size = self._size_sql(self._width())
        rows = self._db.execute(
            f"SELECT table_name, sum({size}), max(commit_seq) FROM {_J} "
            f"WHERE commit_seq > ? GROUP BY table_name", (self._seen_upto,)).fetchall()
        for table, total, top in rows:
            self.bytes[table] = self.bytes.get(table, 0) + int(total)
            self._seen_upto = max(self._seen_upto, int(top))

    def deleted(self, table: str, from_seq: int, upto: int) -> None:
        """Before rows are deleted by someone else (a progress control): account for them."""
        size = self._size_sql(self._width())
        got = self._db.execute(
            f"SELECT sum({size}) FROM {_J} WHERE table_name = ? AND commit_seq >= ? "
            f"AND commit_seq <= ? AND commit_seq <= ?",
            (table, from_seq, upto, self._seen_upto)).fetchone()
        self.bytes[table] = max(0, self.bytes.get(table, 0) - int(got[0] or 0))

    @property
    def total(self) -> int:
        return sum(self.bytes.values())

    def enforce(self) -> int:
        """Drop journal ranges until under the limit; returns how many gaps were made."""
        self.observe()
        gaps = 0
        held = self._reserved_bytes()  # not counted: see __init__
        while self.total - sum(held.values()) > self.limit:
            table = max(self.bytes, key=lambda t: self.bytes[t] - held.get(t, 0))
            if not self._drop_oldest(table, self.total - sum(held.values())
                                     - int(self.limit * _TARGET)):
                break
            gaps += 1
        return gaps

    def _reserved_bytes(self) -> dict[str, int]:
        if self._reserved is None:
            return {}
        size = self._size_sql(self._width())
        out: dict[str, int] = {}
        for ts in self._state.tables():
            for a, b in self._reserved(ts.source_table, ts.journal_epoch):
                got = self._db.execute(
                    f"SELECT sum({size}) FROM {_J} WHERE table_name = ? AND commit_seq >= ? "
                    f"AND commit_seq <= ?", (ts.source_table, a, b)).fetchone()
                out[ts.source_table] = out.get(ts.source_table, 0) + int(got[0] or 0)
        return out

    def _drop_oldest(self, table: str, need: int) -> bool:
        ts = self._state.table(table)
        size = self._size_sql(self._width())
        first = last = None
        freed = 0
        keep = (self._reserved(table, ts.journal_epoch)
                if self._reserved is not None and ts is not None else [])
        for seq, sz in self._db.execute(
                f"SELECT commit_seq, {size} FROM {_J} WHERE table_name = ? "
                f"ORDER BY commit_seq", (table,)):
            if any(a <= seq <= b for a, b in keep):
                if first is None:
                    continue
                break
            first = seq if first is None else first
            last, freed = seq, freed + int(sz)
            if freed >= need:
                break
        if first is None or last is None:
            self.bytes[table] = 0
            return False
        epoch = ts.journal_epoch if ts is not None else "unknown"
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        with self._state.tx():  # recorded before deleting: a crash cannot lose it
            self._state.record_gap(table, epoch, first, last, now)
        truncate_journal(self._db, table, last, from_seq=first)
        self.bytes[table] = max(0, self.bytes.get(table, 0) - freed)
        log.error("journal over local_retention_bytes (%d): dropped %r commit_seq %d..%d "
                  "(%d bytes) of epoch %s; reporting the gap to the cloud",
                  self.limit, table, first, last, freed, epoch)
        return True
