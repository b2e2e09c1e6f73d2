"""A long-lived MQTT connection the worker uses to publish downlink controls."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import NoReturn

from edgesync.errors import BrokerError
from edgesync.protocol import (
    BrokerRotation,
    BrokerUrl,
    Healthy,
    PublishingClient,
    TlsFiles,
    raise_if_cancelling,
    rotation_of,
    session_loop,
    tls_context,
)

__all__ = ["MqttPublisher"]

_log = logging.getLogger(__name__)


class MqttPublisher:
    def __init__(self, url: BrokerUrl | BrokerRotation, *, client_id: str,
                 tls: TlsFiles | None = None) -> None:
        # Several URLs (a broker cluster): each connection attempt takes the next one.
        self._url = rotation_of(url)
        self._client_id = client_id
        self._tls = tls
        self._client: PublishingClient | None = None
        self.connected = asyncio.Event()

    async def run(self) -> NoReturn:
        await session_loop(f"control publisher on {self._url}", self._session, logger=_log)

    async def _session(self, healthy: Healthy) -> None:
        url = self._url.take()
        client = PublishingClient(
            url.host, url.port, client_id=self._client_id, username=url.username,
            password=url.password,
            tls_context=tls_context(url, self._tls))
        try:
            async with client:
                healthy()  # first: it raises a stop swallowed while connecting
                self._client = client
                self.connected.set()
                await client.wait_closed()  # raises the reason the connection ended
        finally:
            self.connected.clear()
            self._client = None

    async def publish(self, topic: str, payload: bytes) -> None:
        await self.publish_all([(topic, payload)])

    async def publish_all(self, messages: Sequence[tuple[str, bytes]]) -> None:
        """Publish in order at QoS 1; returns once the broker acknowledged every one.
        Messages of one call leave together, and calls leave in call order (each
        device's controls keep their sig_seq order)."""
        # A stop dropped earlier must not start a wait for a
        # connection that the stopped publisher will never make again.
        raise_if_cancelling()
        await self.connected.wait()
        client = self._client
        if client is None:  # the session ended meanwhile
            raise BrokerError("publishing failed: the publisher's connection was lost")
        try:
            await client.publish_all(messages)
        except BrokerError as exc:
            raise_if_cancelling()
            where = messages[0][0] if len(messages) == 1 else f"{len(messages)} topics"
            raise BrokerError(f"publishing on {where} failed: {exc}") from exc
