"""Device actions: revoke a device (or one of its credentials); and the device listing
the database-direct CLI prints."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from edgesync import credentials, fleet
from edgesync.store import Conn

__all__ = ["DeviceRevocation", "device_overview", "revoke_device"]


@dataclass(frozen=True, slots=True)
class DeviceRevocation:
    revoked_at: datetime | None  # None: only one credential was revoked
    credentials_revoked: int


async def revoke_device(conn: Conn, device_id: uuid.UUID, *,
                        credential_id: uuid.UUID | None = None,
                        reason: str = "revoked") -> DeviceRevocation:
    """Without ``credential_id``: revoke the device (ingest refuses its messages) and every
    live credential of it; with one: only that credential. One transaction; the broker
    learns of it when its files are written again."""
    async with conn.transaction():
        revoked_at = (await fleet.revoke_device(conn, device_id)
                      if credential_id is None else None)
        n = await credentials.revoke_credentials(conn, device_id, credential_id=credential_id,
                                                 reason=reason)
    return DeviceRevocation(revoked_at, n)


async def device_overview(conn: Conn) -> list[dict[str, Any]]:
    """Every registered device with its project, fleet and presence (``devices list`` on
    the database directly)."""
    return [dict(r) for r in await conn.fetch(
        "SELECT d.id, d.name, p.name AS project, p.topic_slug, f.name AS fleet, "
        "s.last_seen_at, s.online, s.report->>'state' AS agent_state "
        "FROM edge_devices d JOIN edge_projects p ON p.id = d.project_id "
        "LEFT JOIN edge_fleets f ON f.id = d.fleet_id "
        "LEFT JOIN edge_device_status s ON s.device_id = d.id ORDER BY p.name, d.name")]
