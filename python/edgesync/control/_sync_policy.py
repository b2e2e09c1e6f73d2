"""Sending a device its sync policy (``sync_policy``, docs/protocol.md).

The control is queued in the transaction that changed the policy, an attachment, or the
device's fleet attachment; a newer one supersedes the device's older pending ones (only
the latest policy matters, and the agent would skip an older revision anyway). It is
sent, signed and re-sent like every control until the agent acknowledges it.
"""

from __future__ import annotations

import uuid
from typing import Any

from edgesync.control._outbox import enqueue_control, supersede_pending
from edgesync.protocol import ControlKind
from edgesync.store import Conn

__all__ = ["send_sync_policy"]


async def send_sync_policy(conn: Conn, device_id: uuid.UUID, body: dict[str, Any]
                           ) -> uuid.UUID:
    """Queue ``sync_policy`` with ``body`` (revision, policy, table_strategies) for the
    device, superseding its pending ones; call inside the deciding transaction."""
    await supersede_pending(conn, device_id, ControlKind.SYNC_POLICY)
    return await enqueue_control(conn, device_id=device_id, lineage_id=None,
                                 kind=ControlKind.SYNC_POLICY, body=body)
