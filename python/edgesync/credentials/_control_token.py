"""The device's signed-control key (``security.auth_token_env`` on the agent).

Controls are HMAC-signed with it (docs/protocol.md, "Signed controls"), so the cloud
must keep it in clear; it is made once per device and reused by later bundles."""

from __future__ import annotations

import secrets
import uuid

from edgesync import fleet
from edgesync.store import Conn

__all__ = ["ensure_control_token"]


async def ensure_control_token(conn: Conn, device_id: uuid.UUID) -> str:
    """The device's control token, created (and signed control switched on) if missing."""
    token = await fleet.ensure_control_token(conn, device_id, secrets.token_urlsafe(32))
    assert token is not None, f"device {device_id} vanished"
    return str(token)
