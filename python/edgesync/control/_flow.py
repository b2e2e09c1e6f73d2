"""Pauses that reach the device: volume backpressure and the materialization breaker.

Both differ from a schema-review pause (which the device never hears about): the
lineage pauses, the device gets ``pause_lineage`` with the last accepted sequence as
``server_watermark`` through the outbox, and later ``resume_lineage``. Every state
change and its control are written in one transaction.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

import asyncpg

from edgesync.control._outbox import enqueue_control
from edgesync.errors import NotFoundError
from edgesync.fleet import ProjectPolicy
from edgesync.governance import (
    EventType,
    Lineage,
    LineageStatus,
    PauseReason,
    emit,
    note_materialization_error,
    pause_lineage,
    reset_materialization_errors,
    resume_lineage,
    schedule_replay,
)
from edgesync.protocol import ControlKind, Pipeline
from edgesync.store import Conn

__all__ = ["MaterializationReset", "check_backpressure", "record_materialization_failure",
           "reset_materialization", "sweep_backpressure"]

_log = logging.getLogger(__name__)

_LINEAGE = """
SELECT l.*, p.policy FROM edge_table_lineages l JOIN edge_projects p ON p.id = l.project_id
WHERE l.id = $1 FOR UPDATE OF l
"""


async def _watermark(conn: Conn, lineage: asyncpg.Record) -> int:
    column = "batch_seq" if lineage["pipeline"] == Pipeline.TELEMETRY else "last_commit_seq"
    value = await conn.fetchval(
        f"SELECT max({column}) FROM edge_export_segments WHERE device_id = $1 "
        "AND source_table = $2 AND outcome <> 'rejected'",
        lineage["device_id"], lineage["source_table"])
    return int(value or 0)


async def _pause_device(conn: Conn, lineage: asyncpg.Record, reason: PauseReason,
                        detail: str) -> None:
    await pause_lineage(conn, Lineage.from_record(lineage), reason, detail=detail)
    await enqueue_control(conn, device_id=lineage["device_id"], lineage_id=lineage["id"],
                          kind=ControlKind.PAUSE_LINEAGE,
                          body={"source_table": lineage["source_table"],
                                "server_watermark": await _watermark(conn, lineage),
                                "reason": detail})
    _log.warning("lineage %s paused (%s): %s", lineage["id"], reason, detail)


async def _resume_device(conn: Conn, lineage: asyncpg.Record) -> None:
    """Lift a device-visible pause. A schema review still open keeps the lineage paused
    in the cloud (rows stage), but the device may send again."""
    open_review = await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM edge_schema_reviews WHERE lineage_id = $1 "
        "AND status IN ('queued', 'in_review'))", lineage["id"])
    # Deferred columns of the approved schema keep the cloud side paused too.
    deferred = await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM edge_column_bindings WHERE lineage_id = $1 "
        "AND schema_hash = $2 AND action = 'defer')",
        lineage["id"], lineage["approved_schema_hash"])
    still = (PauseReason.SCHEMA_REVIEW if open_review
             else PauseReason.DEFERRED_COLUMNS if deferred else None)
    active = await resume_lineage(conn, Lineage.from_record(lineage), device=True,
                                  still_paused=still)
    if lineage["paused_by_control"]:
        await enqueue_control(conn, device_id=lineage["device_id"], lineage_id=lineage["id"],
                              kind=ControlKind.RESUME_LINEAGE,
                              body={"source_table": lineage["source_table"],
                                    "server_watermark": await _watermark(conn, lineage)})
    if active:
        # Batches staged while paused wait for a replay; schedule one.
        await schedule_replay(conn, lineage["id"])


async def check_backpressure(conn: Conn, lineage_id: uuid.UUID) -> bool:
    """After staging: pause the device when the lineage's backlog crossed a cap.
    Returns whether a pause was sent now."""
    lineage = await conn.fetchrow(_LINEAGE, lineage_id)
    if lineage is None or lineage["paused_by_control"]:
        return False
    policy = ProjectPolicy.from_stored(lineage["policy"])
    if not policy.over_cap(lineage["staged_rows"], lineage["staged_bytes"]):
        return False
    await _pause_device(conn, lineage, PauseReason.BACKPRESSURE,
                        f"staged backlog {lineage['staged_rows']} rows / "
                        f"{lineage['staged_bytes']} bytes exceeds the project's cap")
    return True


async def sweep_backpressure(conn: Conn) -> int:
    """Resume lineages paused for backpressure whose backlog fell below the threshold."""
    ids = await conn.fetch(
        "SELECT id FROM edge_table_lineages WHERE pause_reason = 'backpressure'")
    resumed = 0
    for rec in ids:
        async with conn.transaction():
            lineage = await conn.fetchrow(_LINEAGE, rec["id"])
            if lineage is None or lineage["pause_reason"] != PauseReason.BACKPRESSURE:
                continue
            policy = ProjectPolicy.from_stored(lineage["policy"])
            if policy.below_resume(lineage["staged_rows"], lineage["staged_bytes"]):
                await _resume_device(conn, lineage)
                resumed += 1
    return resumed


async def record_materialization_failure(conn: Conn, lineage_id: uuid.UUID, error: str) -> bool:
    """Count a permanent write error of the lineage's target as a whole (dropped or
    altered by hand, permission taken away: ``materialize.LINEAGE_ERRORS``, or a batch
    that could not be written apart); the breaker opens at the policy's threshold.
    A row's data error is not counted: that row is quarantined and the lineage goes on
    (``edgesync.quarantine``). Returns whether the lineage was paused now."""
    lineage = await conn.fetchrow(_LINEAGE, lineage_id)
    if lineage is None:
        return False
    errors = int(lineage["materialization_errors"]) + 1
    await note_materialization_error(conn, lineage_id, errors, error)
    await emit(conn, lineage["project_id"],
               EventType.MATERIALIZATION_FAILED, lineage_id,
               {"lineage_id": str(lineage_id), "error": error[:500]})
    threshold = ProjectPolicy.from_stored(lineage["policy"]).materialization_breaker_threshold
    if lineage["status"] != LineageStatus.ACTIVE or errors < threshold:
        return False
    await _pause_device(conn, lineage, PauseReason.CIRCUIT_BREAKER,
                        f"{errors} permanent materialization errors; last: {error[:300]}")
    return True


@dataclass(frozen=True, slots=True)
class MaterializationReset:
    """What ``reset_materialization`` did to a lineage (its staged batches are the
    caller's next step, ``staging.requeue_failed``)."""

    lineage_id: uuid.UUID
    quarantined_rows: int  # open quarantined rows, left as they are


async def reset_materialization(conn: Conn, lineage_id: uuid.UUID) -> MaterializationReset:
    """Operator reset after fixing the cause: clear the breaker, schedule replay, and
    resume the device if it had been paused. The caller, in the same transaction, then
    makes the failed staged batches replayable again (``staging.requeue_failed``: staging
    owns them and sits above control); the replay scheduled here runs after the commit.

    Quarantined rows stay quarantined (they are retried only on an operator's word), so
    a reset never trips the breaker again on them; a replayed batch's row that is still
    refused is quarantined too, not counted."""
    lineage = await conn.fetchrow(_LINEAGE, lineage_id)
    if lineage is None:
        raise NotFoundError(f"lineage {lineage_id} not found")
    await reset_materialization_errors(conn, lineage_id)
    if lineage["pause_reason"] == PauseReason.CIRCUIT_BREAKER:
        await _resume_device(conn, lineage)
    await schedule_replay(conn, lineage_id)
    quarantined = await conn.fetchval(
        "SELECT count(*) FROM edge_quarantined_rows WHERE lineage_id = $1 AND status = 'open'",
        lineage_id)
    return MaterializationReset(lineage_id, int(quarantined))
