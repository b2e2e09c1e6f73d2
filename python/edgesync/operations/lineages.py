"""Lineage actions: delete one, reset its materialization, discard its staged rows, reopen
its review; and the lineage listing the database-direct CLI prints."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from edgesync import control, governance, staging
from edgesync.errors import NotFoundError
from edgesync.store import Conn

__all__ = ["LineageDeletion", "MaterializationReset", "delete_lineage", "discard_staged",
           "lineage_overview", "lock_lineage", "reopen_review", "replay_rejected",
           "reset_materialization"]


@dataclass(frozen=True, slots=True)
class LineageDeletion:
    """The lineage as it was, and the ``forget_lineage`` control queued for its device."""

    lineage: governance.Lineage
    forget_control_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class MaterializationReset:
    lineage_id: uuid.UUID
    requeued_batches: int
    quarantined_rows: int  # open quarantined rows, left as they are


async def lock_lineage(conn: Conn, lineage_id: uuid.UUID) -> governance.Lineage:
    """The lineage, locked for the rest of the transaction (its actions serialize)."""
    lineage = await governance.get_lineage_for_update(conn, lineage_id)
    if lineage is None:
        raise NotFoundError(f"lineage {lineage_id} not found")
    return lineage


async def delete_lineage(conn: Conn, lineage_id: uuid.UUID) -> LineageDeletion:
    """Remove the cloud's sync state for the (device, table): versions, reviews, bindings,
    staged rows, ledger entries and pending controls (the state table and its rows stay),
    and tell the device to forget the table, so that it starts it over. Call in a
    transaction."""
    lineage = await lock_lineage(conn, lineage_id)
    await governance.delete_lineage_row(conn, lineage)
    control_id = await control.forget_on_device(conn, lineage.device_id, lineage.source_table)
    return LineageDeletion(lineage, control_id)


async def reset_materialization(conn: Conn, lineage_id: uuid.UUID) -> MaterializationReset:
    """Clear the error counter and the breaker, make the failed staged batches replayable
    and schedule their replay. Call in a transaction."""
    reset = await control.reset_materialization(conn, lineage_id)
    requeued = await staging.requeue_failed(conn, lineage_id)
    return MaterializationReset(reset.lineage_id, requeued, reset.quarantined_rows)


async def discard_staged(conn: Conn, project_id: uuid.UUID, lineage_id: uuid.UUID, *,
                         actor: str, reason: str | None,
                         schema_hash: str | None) -> tuple[int, int]:
    """Delete staged batches for good (all, or of one reason and/or schema version) and
    record who did: ``(batches, rows)``. Call in a transaction."""
    await lock_lineage(conn, lineage_id)
    batches, rows = await staging.discard_staged(conn, lineage_id, reason=reason,
                                                 schema_hash=schema_hash)
    await governance.emit(conn, project_id, governance.EventType.STAGED_ROWS_DISCARDED,
                          lineage_id, {"lineage_id": str(lineage_id), "actor": actor,
                                       "staging_reason": reason, "schema_hash": schema_hash,
                                       "batches": batches, "rows": rows})
    return batches, rows


async def replay_rejected(conn: Conn, lineage_id: uuid.UUID, *, actor: str,
                          schema_hash: str | None, dry_run: bool) -> governance.RebindOutcome:
    """Replay the staged rows of the lineage's rejected schema versions (or the one
    ``schema_hash``) that are compatible with its approved one, under the lineage's lock.
    Call in a transaction."""
    lineage = await lock_lineage(conn, lineage_id)
    return await governance.replay_rejected(conn, lineage, actor=actor, schema_hash=schema_hash,
                                            dry_run=dry_run)


async def reopen_review(conn: Conn, lineage_id: uuid.UUID, *, actor: str) -> governance.Review:
    """A new review of the approved schema of a lineage paused by deferred columns."""
    return await governance.reopen_review(conn, lineage_id, actor=actor)


async def lineage_overview(conn: Conn) -> list[dict[str, Any]]:
    """Every lineage with its counters, by device and table (``lineages list`` on the
    database directly)."""
    return [dict(r) for r in await conn.fetch(
        "SELECT l.id, d.name AS device, l.source_table, l.pipeline, l.status, "
        "l.pause_reason, l.target_table, l.staged_rows, l.materialized_rows, "
        "l.rejected_batches, l.materialization_errors, l.last_error "
        "FROM edge_table_lineages l JOIN edge_devices d ON d.id = l.device_id "
        "ORDER BY d.name, l.source_table")]
