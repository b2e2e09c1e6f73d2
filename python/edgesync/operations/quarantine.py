"""Quarantined rows: retry one or all of a lineage's, discard one or all."""

from __future__ import annotations

import uuid
from typing import Any

from edgesync import governance, quarantine
from edgesync.errors import NotFoundError
from edgesync.operations.lineages import lock_lineage
from edgesync.store import Conn

__all__ = ["discard_quarantined", "retry_all", "retry_row"]


async def retry_row(conn: Conn, lineage_id: uuid.UUID, row_id: int, *, actor: str,
                    values: dict[str, Any] | None) -> quarantine.RetryOutcome:
    """Write one quarantined row again, as it is or with ``values`` replacing its own,
    under the lineage's lock. Call in a transaction."""
    lineage = await lock_lineage(conn, lineage_id)
    return await quarantine.retry_row(conn, lineage, row_id, actor=actor, values=values)


async def retry_all(conn: Conn, lineage_id: uuid.UUID, *, actor: str) -> quarantine.RetryTotals:
    """Write every open quarantined row of the lineage again. Call in a transaction."""
    lineage = await lock_lineage(conn, lineage_id)
    return await quarantine.retry_all(conn, lineage, actor=actor)


async def discard_quarantined(conn: Conn, project_id: uuid.UUID, lineage_id: uuid.UUID,
                              row_id: int | None, *, actor: str) -> int:
    """Delete one quarantined row (``row_id``) or all of the lineage's for good and record
    who did; returns how many went. Call in a transaction."""
    await lock_lineage(conn, lineage_id)
    if row_id is not None and await quarantine.get_row(conn, lineage_id, row_id) is None:
        raise NotFoundError(f"quarantined row {row_id} not found in lineage {lineage_id}")
    n = await quarantine.discard(conn, lineage_id, row_id)
    await governance.emit(conn, project_id, governance.EventType.QUARANTINED_ROWS_DISCARDED,
                          lineage_id, {"lineage_id": str(lineage_id), "actor": actor,
                                       "quarantined_row_id": row_id, "rows": n})
    return n
