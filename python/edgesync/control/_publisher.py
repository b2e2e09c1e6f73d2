"""A long-lived MQTT connection the worker uses to publish downlink controls."""

from __future__ import annotations

import asyncio
import logging
from typing import NoReturn

import aiomqtt

from edgesync.errors import BrokerError
from edgesync.protocol import (
    BrokerUrl,
    Healthy,
    TlsFiles,
    mqtt_client,
    raise_if_cancelling,
    session_loop,
)

__all__ = ["MqttPublisher"]

_log = logging.getLogger(__name__)


class MqttPublisher:
    def __init__(self, url: BrokerUrl, *, client_id: str, tls: TlsFiles | None = None) -> None:
        self._url = url
        self._client_id = client_id
        self._tls = tls
        self._client: aiomqtt.Client | None = None
        self.connected = asyncio.Event()

    async def run(self) -> NoReturn:
        await session_loop(f"control publisher on {self._url}", self._session, logger=_log)

    async def _session(self, healthy: Healthy) -> None:
        client = mqtt_client(self._url, identifier=self._client_id, clean_session=True,
                             tls=self._tls)
        try:
            async with client:
                healthy()  # first: it raises a stop swallowed while connecting
                self._client = client
                self.connected.set()
                # Nothing is subscribed: iterating only surfaces a lost connection.
                async for _ in client.messages:
                    pass
        finally:
            self.connected.clear()
            self._client = None

    async def publish(self, topic: str, payload: bytes) -> None:
        # A stop dropped earlier (aiomqtt's wait_for) must not start a wait for a
        # connection that the stopped publisher will never make again.
        raise_if_cancelling()
        await self.connected.wait()
        assert self._client is not None
        try:
            await self._client.publish(topic, payload, qos=1)
        except aiomqtt.MqttError as exc:
            raise_if_cancelling()
            raise BrokerError(f"publishing on {topic} failed: {exc}") from exc
