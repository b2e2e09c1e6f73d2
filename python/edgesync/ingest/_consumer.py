"""MQTT → ingest pipeline, with reconnects."""

from __future__ import annotations

import asyncio
import logging

import aiomqtt

from edgesync.ingest._pipeline import IngestPipeline
from edgesync.protocol import (
    Backoff,
    BrokerUrl,
    TlsFiles,
    mqtt_client,
    raise_if_cancelling,
    worker_subscriptions,
)

__all__ = ["MqttIngest"]

_log = logging.getLogger(__name__)


class MqttIngest:
    def __init__(self, pipeline: IngestPipeline, url: BrokerUrl, *, client_id: str,
                 tls: TlsFiles | None = None, shared_group: str | None = None) -> None:
        self._pipeline = pipeline
        self._url = url
        self._client_id = client_id
        self._tls = tls
        self._shared_group = shared_group
        self.connected = asyncio.Event()

    async def run(self) -> None:
        backoff = Backoff()
        while True:
            try:
                await self._consume(backoff)
            except aiomqtt.MqttError as exc:
                raise_if_cancelling()
                wait = backoff.next_delay()
                _log.warning("broker %s: %s; reconnecting in %.1fs", self._url, exc, wait)
                await asyncio.sleep(wait)
            finally:
                self.connected.clear()

    async def _consume(self, backoff: Backoff) -> None:
        client = mqtt_client(self._url, identifier=self._client_id, clean_session=False,
                             tls=self._tls)
        async with client:
            raise_if_cancelling()  # a stop that arrived while connecting
            for topic_filter in worker_subscriptions(self._shared_group):
                await client.subscribe(topic_filter, qos=1)
            self.connected.set()
            backoff.reset()
            _log.info("ingest subscribed on %s", self._url)
            async for message in client.messages:
                payload = message.payload
                if not isinstance(payload, bytes | bytearray):
                    payload = str(payload).encode()
                try:
                    outcome = await self._pipeline.handle(str(message.topic), bytes(payload))
                except Exception:
                    _log.exception("ingest of a message on %s failed", message.topic)
                    continue
                _log.debug("%s → %s %s", message.topic, outcome.status, outcome.code or "")
