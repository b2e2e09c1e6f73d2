"""What each downlink control does to the agent's state (run on the database thread).

* ``progress`` (edgesync extension): the cloud durably committed a table up to a point.
  Rows tables: ``journal_epoch`` + ``committed_commit_seq`` delete journal rows.
  Telemetry tables: ``committed_batch_seq`` drops buffered batches.
* ``pause_lineage``: stop publishing the table, keep capturing, remember
  ``server_watermark``.
* ``resume_lineage``: publish again from ``server_watermark + 1`` (commit_seq for rows
  tables, batch_seq for telemetry tables), then flush normally.
* ``state_write``, ``url_grant``: acknowledged and logged; not supported yet.

A malformed control is logged and has no effect (it was acknowledged all the same: the
cloud must not resend it forever).
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

from edgesync.agent._batcher import truncate_journal
from edgesync.agent._retention import JournalBudget
from edgesync.agent._state import StateStore
from edgesync.agent._telemetry_state import TelemetryState

__all__ = ["execute_control"]

log = logging.getLogger("edgesync.agent")


def _int(doc: dict[str, Any], key: str) -> int | None:
    v = doc.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def execute_control(doc: dict[str, Any], source: sqlite3.Connection, state: StateStore,
                    telemetry: TelemetryState, budget: JournalBudget | None = None) -> None:
    cid, kind, table = doc.get("control_id"), doc.get("control_kind"), doc.get("source_table")
    if kind not in ("progress", "pause_lineage", "resume_lineage"):
        log.info("control %s (%s) acknowledged; kind not supported yet", cid, kind)
        return
    if not isinstance(table, str) or not table:
        log.warning("control %s (%s) has no source_table; ignored", cid, kind)
        return
    is_telemetry = telemetry.table(table) is not None
    if kind == "progress":
        if is_telemetry:
            _telemetry_progress(cid, doc, table, telemetry)
        else:
            _rows_progress(cid, doc, table, source, state, budget)
        return
    watermark = _int(doc, "server_watermark")
    if doc.get("server_watermark") is not None and watermark is None:
        log.warning("control %s (%s): server_watermark must be a non-negative integer; "
                    "ignored", cid, kind)
        return
    if kind == "pause_lineage":
        ok = (telemetry.pause(table, watermark) if is_telemetry
              else state.pause(table, watermark))
        if ok:
            log.info("pause_lineage source_table=%s watermark=%s reason=%s", table, watermark,
                     doc.get("reason"))
    else:
        ok = (telemetry.resume(table, watermark) if is_telemetry
              else state.resume(table, watermark))
        if ok:
            log.info("resume_lineage source_table=%s watermark=%s", table, watermark)
    if not ok:
        log.warning("control %s (%s) names table %r, which this agent does not publish",
                    cid, kind, table)


def _rows_progress(cid: object, doc: dict[str, Any], table: str,
                   source: sqlite3.Connection, state: StateStore,
                   budget: JournalBudget | None) -> None:
    epoch, committed = doc.get("journal_epoch"), _int(doc, "committed_commit_seq")
    if not isinstance(epoch, str) or committed is None:
        log.warning("progress control %s is malformed (needs source_table, journal_epoch, "
                    "committed_commit_seq); ignored", cid)
        return
    ts = state.table(table)
    if ts is None or ts.journal_epoch != epoch:
        log.warning("progress for %r ignored: journal epoch %s is not the current one (%s)",
                    table, epoch, ts.journal_epoch if ts else "unknown table")
        return
    if budget is not None:
        budget.deleted(table, 0, committed)
    deleted = truncate_journal(source, table, committed)
    state.record_progress(table, committed)
    log.info("progress %s: %r committed up to commit_seq %d; %d journal row(s) removed",
             cid, table, committed, deleted)


def _telemetry_progress(cid: object, doc: dict[str, Any], table: str,
                        telemetry: TelemetryState) -> None:
    committed = _int(doc, "committed_batch_seq")
    if committed is None:
        log.warning("progress control %s for telemetry table %r needs committed_batch_seq; "
                    "ignored", cid, table)
        return
    dropped = telemetry.committed(table, committed)
    log.info("progress %s: %r committed up to batch_seq %d; %d buffered batch(es) dropped",
             cid, table, committed, dropped)
