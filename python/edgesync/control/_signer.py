"""Signing of controls for devices that require it (see docs/protocol.md)."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import timedelta
from typing import Any

from edgesync.errors import ConfigError
from edgesync.fleet import take_control_seqs
from edgesync.protocol import sign_control
from edgesync.store import Conn

__all__ = ["sign_for_device", "sign_for_devices"]


async def sign_for_device(conn: Conn, device_id: uuid.UUID, body: dict[str, Any], *,
                          ttl: timedelta) -> dict[str, Any]:
    """The body as it goes on the wire: signed with the next ``sig_seq`` when the device
    has signed control, unchanged otherwise. Call inside a transaction."""
    [wire] = await sign_for_devices(conn, [(device_id, body)], ttl=ttl)
    if isinstance(wire, ConfigError):
        raise wire
    return wire


async def sign_for_devices(conn: Conn, controls: list[tuple[uuid.UUID, dict[str, Any]]], *,
                           ttl: timedelta) -> list[dict[str, Any] | ConfigError]:
    """``sign_for_device`` for many controls in one statement: each signed device takes
    as many ``sig_seq`` as it has controls here, assigned in list order (so publish them
    in that order). A device with signed control but no token gets its ConfigError in
    place of a body. Call inside a transaction; the device rows stay locked until it
    ends, so no other signer can publish a higher ``sig_seq`` in between."""
    counts = Counter(device_id for device_id, _ in controls)
    rows = await take_control_seqs(conn, counts)
    # The first sig_seq of each signed device in this call.
    next_seq = {r["id"]: int(r["control_seq"]) - counts[r["id"]] + 1 for r in rows}
    tokens = {r["id"]: r["control_token"] for r in rows}
    out: list[dict[str, Any] | ConfigError] = []
    for device_id, body in controls:
        if device_id not in next_seq:
            out.append(body)
            continue
        seq = next_seq[device_id]
        next_seq[device_id] = seq + 1
        token = tokens[device_id]
        if not token:
            out.append(ConfigError("control_token",
                                   f"device {device_id} has signed control but no token"))
            continue
        out.append(sign_control(body, token.encode(), seq=seq, ttl=ttl))
    return out
