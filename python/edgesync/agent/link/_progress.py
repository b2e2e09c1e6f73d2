"""``progress`` controls: the cloud confirms the batches it durably committed.

Confirmations are per batch, not a watermark (docs/protocol.md, *Progress control*)::

    {"control_kind": "progress", "source_table": "t", "journal_epoch": "…",
     "committed": [{"batch_id": "…", "first_commit_seq": 1, "last_commit_seq": 80}]}
    {"control_kind": "progress", "source_table": "temps",
     "committed": [{"batch_id": "…", "batch_seq": 7}]}

Rows tables: the journal rows of the table in each confirmed range are deleted (only
for the current ``journal_epoch``). The range the agent recorded for that batch id is
used when it is wider (it also spans journal rows whose table row was gone when the
batch was built). Telemetry tables: the confirmed batches leave the outbox. The older
watermark fields (``committed_commit_seq``, ``committed_batch_seq``) are still obeyed.

Published batches that stay unconfirmed longer than ``confirm_timeout`` are sent again
(``resend_unconfirmed``): the cloud answers a repeat as a duplicate and confirms it.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from edgesync.agent._state import StateStore
from edgesync.agent.capture._batcher import truncate_journal
from edgesync.agent.capture._retention import JournalBudget
from edgesync.agent.capture._telemetry_state import TelemetryState

__all__ = ["Confirmed", "ProgressLog", "parse_committed", "resend_unconfirmed",
           "rows_progress", "telemetry_progress"]

log = logging.getLogger("edgesync.agent")


@dataclass(frozen=True, slots=True)
class Confirmed:
    batch_id: str
    first_commit_seq: int | None = None
    last_commit_seq: int | None = None
    batch_seq: int | None = None


def _int(doc: dict[str, Any], key: str) -> int | None:
    v = doc.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def parse_committed(doc: dict[str, Any]) -> list[Confirmed] | None:
    """The ``committed`` entries; None when the list is malformed (absent: empty)."""
    raw = doc.get("committed", [])
    if not isinstance(raw, list):
        return None
    out = []
    for e in raw:
        if not isinstance(e, dict) or not isinstance(e.get("batch_id"), str):
            return None
        first, last, seq = (_int(e, "first_commit_seq"), _int(e, "last_commit_seq"),
                            _int(e, "batch_seq"))
        if seq is None and (first is None or last is None or first > last):
            return None
        out.append(Confirmed(e["batch_id"], first, last, seq))
    return out


@dataclass(slots=True)
class ProgressLog:
    """Confirmations summed up at INFO at most once a ``period`` (each one is logged at
    DEBUG): the cloud confirms every batch, and a line per batch buried the rest of the
    agent's log. The first confirmation is logged at once (the link works)."""

    period: float = 60.0
    clock: Callable[[], float] = time.monotonic
    batches: int = 0
    removed: int = 0
    tables: set[str] = field(default_factory=set)
    since: float | None = None

    def confirmed(self, table: str, batches: int, removed: int) -> None:
        self.batches += batches
        self.removed += removed
        self.tables.add(table)
        now = self.clock()
        if self.since is not None and now - self.since < self.period:
            return
        window = "" if self.since is None else f" in the last {now - self.since:.0f} s"
        log.info("progress: %d batch(es) of %d table(s) confirmed by the cloud%s; %d journal "
                 "row(s) removed", self.batches, len(self.tables), window, self.removed)
        self.batches, self.removed, self.since = 0, 0, now
        self.tables.clear()


PROGRESS_LOG = ProgressLog()


def rows_progress(doc: dict[str, Any], table: str, source: sqlite3.Connection,
                  state: StateStore, budget: JournalBudget | None) -> int:
    """Apply a progress control to a rows table; returns the journal rows deleted."""
    cid, epoch = doc.get("control_id"), doc.get("journal_epoch")
    entries, legacy = parse_committed(doc), _int(doc, "committed_commit_seq")
    if not isinstance(epoch, str) or entries is None or (not entries and legacy is None):
        log.warning("progress control %s is malformed (needs source_table, journal_epoch "
                    "and committed batches); ignored", cid)
        return 0
    ts = state.table(table)
    if ts is None or ts.journal_epoch != epoch:
        log.warning("progress for %r ignored: journal epoch %s is not the current one (%s)",
                    table, epoch, ts.journal_epoch if ts else "unknown table")
        return 0

    def delete(first: int, last: int) -> int:
        if budget is not None:
            budget.deleted(table, first, last)
        return truncate_journal(source, table, last, from_seq=first)

    deleted = 0
    for e in entries:
        if e.first_commit_seq is None or e.last_commit_seq is None:
            continue
        first, last = e.first_commit_seq, e.last_commit_seq
        mine = state.published(e.batch_id)
        if mine is not None and mine.source_table == table and mine.journal_epoch == epoch:
            first, last = min(first, mine.first_commit_seq), max(last, mine.last_commit_seq)
        deleted += delete(first, last)
        state.batch_committed(table, e.batch_id)
    if legacy is not None:
        deleted += delete(0, legacy)
        state.record_progress(table, legacy)
    batches = len(entries) + (legacy is not None)
    log.debug("progress %s: %r, %d batch(es) committed; %d journal row(s) removed", cid,
              table, batches, deleted)
    PROGRESS_LOG.confirmed(table, batches, deleted)
    return deleted


def telemetry_progress(doc: dict[str, Any], table: str, telemetry: TelemetryState) -> int:
    """Apply a progress control to a telemetry table; returns the batches dropped."""
    cid = doc.get("control_id")
    entries, legacy = parse_committed(doc), _int(doc, "committed_batch_seq")
    if entries is None or (not entries and legacy is None):
        log.warning("progress control %s for telemetry table %r needs committed batches; "
                    "ignored", cid, table)
        return 0
    dropped = telemetry.committed_batches(table, [e.batch_id for e in entries])
    if legacy is not None:
        dropped += telemetry.committed(table, legacy)
    log.debug("progress %s: %r, %d batch(es) confirmed, removed from the buffer", cid, table,
              dropped)
    PROGRESS_LOG.confirmed(table, dropped, 0)
    return dropped


# What usually keeps confirmations away, in the order an operator should check it.
UNCONFIRMED_CAUSES = (
    "likely causes: edgesync serve is not running or not connected to this broker; "
    "this device is not registered, or connection.device_id / root_topic do not match "
    "its registration (the server then logs 'unknown device' for this topic); the "
    "broker's ACL does not let this device receive {root}/sync/ingest/control; signed "
    "controls are refused (a different auth token on the device and the server)")


def resend_unconfirmed(state: StateStore, telemetry: TelemetryState, rows_tables: list[str],
                       telemetry_tables: list[str], published_before: float) -> None:
    """Queue again what was published before ``published_before`` and is still not
    confirmed: rows tables rewind their cursor (rows are re-read at flush time, new
    batch ids), telemetry batches are re-published as they are (same id and seq)."""
    for table in rows_tables:
        ts = state.table(table)
        if ts is None or ts.paused:
            continue
        cursor = state.rewind_unconfirmed(table, published_before)
        if cursor is not None:
            log.warning("%r: published batches not confirmed by the cloud in time; "
                        "publishing again after commit_seq %d (%s)", table, cursor,
                        UNCONFIRMED_CAUSES)
    for table in telemetry_tables:
        n = telemetry.republish_unconfirmed(table, published_before)
        if n:
            log.warning("%r: %d telemetry batch(es) not confirmed by the cloud in time; "
                        "publishing them again (%s)", table, n, UNCONFIRMED_CAUSES)
