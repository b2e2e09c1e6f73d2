"""Publishes pending controls from the outbox until each is acknowledged.

A control is (re)published when it was never sent or its last send is older than
``resend_after``; the broker's persistent session delivers it to a device that was
offline. Devices with signed control get a fresh ``sig_seq`` and expiry each time a
control is signed, so a re-sent control is never a replay of an expired one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, NoReturn, Protocol

import asyncpg
import orjson

from edgesync.control._outbox import CONTROL_CHANNEL, ControlStatus, note_sent
from edgesync.control._signer import sign_for_device
from edgesync.errors import ConfigError
from edgesync.protocol import TopicKind, listen_loop, topic_for

__all__ = ["ControlSender", "Publisher"]

_log = logging.getLogger(__name__)


class Publisher(Protocol):
    async def publish(self, topic: str, payload: bytes) -> None: ...

    async def publish_all(self, messages: Sequence[tuple[str, bytes]]) -> None:
        """Each ``(topic, payload)`` in order; returns once all were acknowledged."""


class ControlSender:
    def __init__(self, pool: asyncpg.Pool, publisher: Publisher, *,
                 resend_after: timedelta = timedelta(seconds=30),
                 signature_ttl: timedelta = timedelta(minutes=10),
                 poll_interval: float = 2.0) -> None:
        self._pool = pool
        self._publisher = publisher
        self._resend_after = resend_after
        self._ttl = signature_ttl
        self._poll = poll_interval
        self.wake = asyncio.Event()
        """Set it to send due controls now (a NOTIFY on the outbox channel does too)."""

    async def run(self) -> NoReturn:
        await listen_loop("control sender", self._pool, CONTROL_CHANNEL, self.send_due,
                          poll=self._poll, wake=self.wake, logger=_log)

    async def send_due(self) -> int:
        """Publish every control that is due; returns how many were sent."""
        sent = 0
        async with self._pool.acquire() as conn:
            due = await conn.fetch(
                "SELECT c.id, c.body, d.id AS device_id, d.name, p.topic_slug "
                "FROM edge_pending_controls c JOIN edge_devices d ON d.id = c.device_id "
                "JOIN edge_projects p ON p.id = d.project_id "
                f"WHERE c.status = '{ControlStatus.PENDING}' AND (c.last_sent_at IS NULL "
                "  OR c.last_sent_at < now() - $1::interval) "
                "ORDER BY c.created_at LIMIT 500", self._resend_after)
            for rec in due:
                # Published before the commit: signing locks the device row, so no other
                # signer (progress reporter, another worker) can publish a higher sig_seq
                # for this device before this control is out (the agent would then refuse
                # this one as replayed).
                async with conn.transaction():
                    body: dict[str, Any] | None
                    error: str | None = None
                    try:
                        body = await sign_for_device(conn, rec["device_id"], dict(rec["body"]),
                                                     ttl=self._ttl)
                    except ConfigError as exc:
                        _log.error("control %s not sent: %s", rec["id"], exc)
                        body, error = None, str(exc)
                    await note_sent(conn, rec["id"], body.get("sig_seq") if body else None,
                                    error)
                    if body is None:
                        continue
                    topic = topic_for(f"{rec['topic_slug']}/{rec['name']}",
                                      TopicKind.INGEST_CONTROL)
                    await self._publisher.publish(topic, orjson.dumps(body))
                # A stop aiomqtt's wait_for dropped as the PUBACK came is raised by the
                # next publish (inside its transaction, so before its sig_seq is sent) or
                # by listen_loop after the round.
                sent += 1
        return sent
