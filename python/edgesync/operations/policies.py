"""Sync policies: attach one to a device or a fleet."""

from __future__ import annotations

import uuid

from edgesync import syncpolicy
from edgesync.store import Conn

__all__ = ["attach_policy"]


async def attach_policy(conn: Conn, project_id: uuid.UUID, policy_id: uuid.UUID, *,
                        device_id: uuid.UUID | None,
                        fleet_id: uuid.UUID | None) -> syncpolicy.PolicyAttachment:
    """Attach the policy to a device or a fleet, replacing what was attached to it."""
    return await syncpolicy.attach_policy(conn, project_id, policy_id, device_id=device_id,
                                          fleet_id=fleet_id)
