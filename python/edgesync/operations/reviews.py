"""Schema review decisions: approve, reject."""

from __future__ import annotations

import uuid
from typing import Any

from edgesync import governance, staging
from edgesync.store import Conn

__all__ = ["approve_review", "reject_review"]


async def _current(conn: Conn, review_id: uuid.UUID, action_version: int | None) -> int:
    """The action_version to decide at: the one the caller last saw, else the current one
    (the database-direct CLI decides on what is there now)."""
    if action_version is not None:
        return action_version
    return (await governance.get_review(conn, review_id)).action_version


async def approve_review(conn: Conn, review_id: uuid.UUID, *, actor: str,
                         action_version: int | None,
                         column_actions: list[dict[str, Any]] | None,
                         sync_authority: str | None = None) -> governance.Review:
    """Approve a queued or in-review review (a queued one is claimed in the same
    transaction, so a refused approval leaves it as it was)."""
    version = await _current(conn, review_id, action_version)
    return await governance.approve_review(conn, review_id, actor=actor, action_version=version,
                                           column_actions=column_actions,
                                           sync_authority=sync_authority)


async def reject_review(conn: Conn, review_id: uuid.UUID, *, actor: str,
                        action_version: int | None, reason: str | None) -> governance.Review:
    """Reject the review and label the lineage's staged rows of that schema version
    ``schema_rejected``, in one transaction."""
    async with conn.transaction():
        version = await _current(conn, review_id, action_version)
        rejected = await governance.reject_review(conn, review_id, actor=actor,
                                                  action_version=version, reason=reason)
        await staging.label_schema_rejected(conn, rejected.lineage_id, rejected.schema_hash)
    return rejected
