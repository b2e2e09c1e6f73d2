"""The transactional outbox of downlink controls.

A control is written in the same transaction as the decision that caused it (a
pause, a resume, a state write), so the decision and the intent to tell the device
commit together; the sender publishes it afterwards and again until the device
acknowledges its ``control_id``. This module is the one writer of
``edge_pending_controls``.
"""

from __future__ import annotations

import enum
import uuid
from typing import Any

from edgesync.protocol import ControlKind
from edgesync.store import Conn

__all__ = ["CONTROL_CHANNEL", "ControlStatus", "ack_control", "enqueue_control", "note_sent"]

CONTROL_CHANNEL = "edge_controls"


class ControlStatus(enum.StrEnum):
    """A control in the outbox: ``pending`` (sent until acknowledged) → ``acked``, or
    ``superseded`` by a newer control of its kind before that (never sent again)."""

    PENDING = "pending"
    ACKED = "acked"
    SUPERSEDED = "superseded"


# Spelled into the statements, not passed as parameters: the outbox's partial index
# (``WHERE status = 'pending'``) serves only a query that names the value itself.
_PENDING = f"'{ControlStatus.PENDING}'"


async def enqueue_control(conn: Conn, *, device_id: uuid.UUID, lineage_id: uuid.UUID | None,
                          kind: ControlKind, body: dict[str, Any]) -> uuid.UUID:
    control_id = uuid.uuid4()
    doc = {"control_id": str(control_id), "control_kind": kind, **body}
    await conn.execute(
        "INSERT INTO edge_pending_controls (id, device_id, lineage_id, control_kind, body) "
        "VALUES ($1, $2, $3, $4, $5)", control_id, device_id, lineage_id, kind, doc)
    await conn.execute("SELECT pg_notify($1, $2)", CONTROL_CHANNEL, str(device_id))
    return control_id


async def note_sent(conn: Conn, control_id: uuid.UUID, sig_seq: int | None,
                    error: str | None) -> None:
    """One more attempt at sending the control (``error``: why it could not be signed)."""
    await conn.execute(
        "UPDATE edge_pending_controls SET attempts = attempts + 1, "
        "last_sent_at = now(), sig_seq = $2, last_error = $3 WHERE id = $1",
        control_id, sig_seq, error)


async def ack_control(conn: Conn, device_id: uuid.UUID, control_id: uuid.UUID) -> None:
    """The device acknowledged ``control_id``: it is not sent again."""
    await conn.execute(
        f"UPDATE edge_pending_controls SET status = '{ControlStatus.ACKED}', acked_at = now() "
        f"WHERE id = $1 AND device_id = $2 AND status = {_PENDING}", control_id, device_id)


async def supersede_pending(conn: Conn, device_id: uuid.UUID, kind: ControlKind) -> None:
    """The device's pending controls of ``kind`` are superseded (a newer one replaces them;
    a superseded control is never sent)."""
    await conn.execute(
        f"UPDATE edge_pending_controls SET status = '{ControlStatus.SUPERSEDED}' "
        f"WHERE device_id = $1 AND control_kind = $2 AND status = {_PENDING}", device_id, kind)
