"""Recovery of a state table: ask its device to send it again (re-snapshot) or to send a
digest of it to compare with the mirror (verify)."""

from __future__ import annotations

import uuid
from typing import Any

from edgesync import control
from edgesync.store import Conn

__all__ = ["request_resnapshot", "request_verify"]


async def request_resnapshot(conn: Conn, project_id: uuid.UUID, lineage_id: uuid.UUID, *,
                             filter_doc: Any, actor: str) -> control.Resnapshot:
    """Record a re-snapshot (all rows, or those ``filter_doc`` selects) and queue its
    control. Call in a transaction."""
    return await control.request_resnapshot(conn, project_id, lineage_id, filter_doc=filter_doc,
                                            actor=actor)


async def request_verify(conn: Conn, project_id: uuid.UUID, lineage_id: uuid.UUID, *,
                         prefix: int, repair: bool, actor: str) -> control.Verification:
    """Record a verification (``repair``: re-snapshot the buckets that differ) and queue
    its control. Call in a transaction."""
    return await control.request_verify(conn, project_id, lineage_id, prefix=prefix,
                                        repair=repair, actor=actor)
