"""What each downlink control does to the agent's state (run on the database thread).

* ``progress`` (edgesync extension): the cloud durably committed these batches
  (``_progress``): their journal rows are deleted / they leave the telemetry outbox.
* ``pause_lineage``: stop publishing the table, keep capturing, remember
  ``server_watermark``.
* ``resume_lineage``: publish again from ``server_watermark + 1`` (commit_seq for rows
  tables, batch_seq for telemetry tables), then flush normally.
* ``state_write``: the cloud's rows are written into the table without being
  journaled back (``_writeback``).
* ``url_grant``: an upload slot for a requested object; recorded here, uploaded by the
  agent's next flush (``_uploads``).
* ``forget_lineage`` (edgesync extension): the cloud deleted the table's lineage. The
  table is published again as a new one (``StateStore.forget`` /
  ``TelemetryState.forget``: resumed, schema re-sent, cursor rewound) and, for a rows
  table, every current row is journaled again as an insert, so the lineage the next
  batch re-creates ends complete. Executing it twice (a crash in between) journals the
  rows twice: harmless, newer wins.
* ``sync_policy`` (edgesync extension): the device's sync policy; applied (the tables
  discovered again with its ``table_strategies``) only where the YAML opts in
  (``_remote_policy``).
* ``resnapshot`` / ``verify_table`` (edgesync extensions): recorded here, run by the
  agent's flushes (``_resnapshot``, ``_verify``; docs/recovery.md).

A malformed control is logged and has no effect (it was acknowledged all the same: the
cloud must not resend it forever).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from edgesync.agent.capture._triggers import snapshot_sql
from edgesync.agent.jobs._writeback import apply_state_write
from edgesync.agent.link._progress import rows_progress, telemetry_progress
from edgesync.protocol import ControlKind

if TYPE_CHECKING:  # the device database calls this module; it is only a type here
    from edgesync.agent._device_db import DeviceDatabase

__all__ = ["execute_control"]

log = logging.getLogger("edgesync.agent")


def _int(doc: dict[str, Any], key: str) -> int | None:
    v = doc.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


# A tuple, not a set: ``control_kind`` comes from JSON and may be unhashable (a list).
_KINDS = tuple(ControlKind)


def execute_control(doc: dict[str, Any], device: DeviceDatabase) -> None:
    cid, kind, table = doc.get("control_id"), doc.get("control_kind"), doc.get("source_table")
    if kind not in _KINDS:
        log.info("control %s (%s) acknowledged; kind not supported", cid, kind)
        return
    if kind == ControlKind.SYNC_POLICY:  # names no table: about the whole configuration
        device.apply_policy(doc)
        return
    if not isinstance(table, str) or not table:
        log.warning("control %s (%s) has no source_table; ignored", cid, kind)
        return
    if kind == ControlKind.STATE_WRITE:
        apply_state_write(doc, device.source, device.table_info(table), device.versions)
        return
    if kind == ControlKind.URL_GRANT:
        device.uploads.granted(doc)
        return
    if kind == ControlKind.RESNAPSHOT:
        device.resnapshots.requested(doc, device.table_info(table))
        return
    if kind == ControlKind.VERIFY_TABLE:
        device.verifications.requested(doc)
        return
    state, telemetry = device.state, device.telemetry_state
    is_telemetry = telemetry.table(table) is not None
    if kind == ControlKind.FORGET_LINEAGE:
        _forget(cid, table, is_telemetry, device)
        return
    if kind == ControlKind.PROGRESS:
        if is_telemetry:
            telemetry_progress(doc, table, telemetry)
        else:
            rows_progress(doc, table, device.source, state, device.budget)
        return
    watermark = _int(doc, "server_watermark")
    if doc.get("server_watermark") is not None and watermark is None:
        log.warning("control %s (%s): server_watermark must be a non-negative integer; "
                    "ignored", cid, kind)
        return
    if kind == ControlKind.PAUSE_LINEAGE:
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


def _forget(cid: object, table: str, is_telemetry: bool, device: DeviceDatabase) -> None:
    source = device.source
    if is_telemetry:
        ok = device.telemetry_state.forget(table)
    else:
        info = device.table_info(table)
        ok = info is not None and device.state.forget(table)
        if info is not None and ok:
            # Re-journal before anything else is published: the new lineage's first
            # batches then carry the table's whole current content.
            source.execute("BEGIN IMMEDIATE")
            try:
                n = source.execute(snapshot_sql(info)).rowcount
                source.execute("COMMIT")
            except BaseException:
                source.execute("ROLLBACK")
                raise
            log.info("forget_lineage source_table=%s: %d row(s) journaled again", table, n)
    device.versions.forget(table)
    if ok:
        log.warning("forget_lineage source_table=%s: the cloud deleted its lineage; the "
                    "table is sent again from the start", table)
    else:
        log.warning("control %s (forget_lineage) names table %r, which this agent does not "
                    "publish", cid, table)
