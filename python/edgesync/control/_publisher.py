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
# Publishes awaiting their PUBACK at once (below aiomqtt's warning threshold of 10).
_IN_FLIGHT = 8


class MqttPublisher:
    def __init__(self, url: BrokerUrl, *, client_id: str, tls: TlsFiles | None = None) -> None:
        self._url = url
        self._client_id = client_id
        self._tls = tls
        self._client: aiomqtt.Client | None = None
        self.connected = asyncio.Event()
        # aiomqtt looks through every pending call on each publish (and warns past 10),
        # so a progress round published at once would cost the square of its size: a
        # few publishes wait for their PUBACK at a time, the others queue here in order
        # (a FIFO semaphore: each device's controls still leave in sig_seq order).
        self._in_flight = asyncio.Semaphore(_IN_FLIGHT)

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
            async with self._in_flight:
                client = self._client
                if client is None:  # the session ended while this one queued
                    raise aiomqtt.MqttError("the publisher's connection was lost")
                await client.publish(topic, payload, qos=1)
        except aiomqtt.MqttError as exc:
            raise_if_cancelling()
            raise BrokerError(f"publishing on {topic} failed: {exc}") from exc
