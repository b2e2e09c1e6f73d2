"""Telling a device its table's lineage was deleted (``forget_lineage``).

Deleting a lineage removes the cloud's whole sync state of the (device, table); a device
that was paused would otherwise stay paused for ever, and one that was not would go on
sending batches the cloud files under a new lineage with no schema and no history. The
control makes the device start the table over (docs/protocol.md): resumed, schema sent
again, every current row journaled again — so the next batch re-creates the lineage and,
once approved, it is complete.

The control is queued with no ``lineage_id``: the lineage row it would point to is
deleted in the same transaction (and its own pending controls with it).
"""

from __future__ import annotations

import enum
import uuid

from edgesync.control._outbox import enqueue_control
from edgesync.protocol import ControlKind
from edgesync.store import Conn

__all__ = ["FORGET_LINEAGE", "AfterForget", "forget_on_device"]

FORGET_LINEAGE = ControlKind.FORGET_LINEAGE


class AfterForget(enum.StrEnum):
    """What ``forget_lineage`` makes the device do (the DELETE answer's ``device_will``)."""

    RESEND_TABLE = "resend_table"  # resumed; its schema and every current row sent again


async def forget_on_device(conn: Conn, device_id: uuid.UUID, source_table: str) -> uuid.UUID:
    """Queue ``forget_lineage`` for ``source_table``; call in the deleting transaction."""
    return await enqueue_control(conn, device_id=device_id, lineage_id=None,
                                 kind=FORGET_LINEAGE,
                                 body={"source_table": source_table,
                                       "reason": "lineage_deleted"})
