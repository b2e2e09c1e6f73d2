"""Governance events: stored, then announced with NOTIFY for live followers."""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from edgesync.store import Conn

__all__ = ["EVENT_CHANNEL", "emit"]

EVENT_CHANNEL = "edge_events"


async def emit(conn: Conn, project_id: uuid.UUID, event_type: str,
               subject_id: uuid.UUID | None, body: dict[str, Any]) -> None:
    """Record an event in the caller's transaction (it is visible only if that commits)."""
    event_id = await conn.fetchval(
        "INSERT INTO edge_events (project_id, event_type, subject_id, body) "
        "VALUES ($1, $2, $3, $4) RETURNING id",
        project_id, event_type, subject_id, body)
    await conn.execute("SELECT pg_notify($1, $2)", EVENT_CHANNEL,
                       orjson.dumps({"id": event_id, "type": event_type}).decode())
