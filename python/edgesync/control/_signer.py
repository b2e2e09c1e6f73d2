"""Signing of controls for devices that require it (see docs/protocol.md)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from edgesync.errors import ConfigError
from edgesync.protocol import sign_control
from edgesync.store import Conn

__all__ = ["sign_for_device"]


async def sign_for_device(conn: Conn, device_id: uuid.UUID, body: dict[str, Any], *,
                          ttl: timedelta) -> dict[str, Any]:
    """The body as it goes on the wire: signed with the next ``sig_seq`` when the device
    has signed control, unchanged otherwise. Call inside a transaction."""
    dev = await conn.fetchrow(
        "UPDATE edge_devices SET control_seq = control_seq + 1 WHERE id = $1 "
        "AND signed_control RETURNING control_seq, control_token", device_id)
    if dev is None:
        return body
    if not dev["control_token"]:
        raise ConfigError("control_token", f"device {device_id} has signed control but no token")
    return sign_control(body, dev["control_token"].encode(), seq=int(dev["control_seq"]),
                        ttl=ttl)
