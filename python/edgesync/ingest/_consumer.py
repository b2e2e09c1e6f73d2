"""MQTT → ingest pipeline, with reconnects."""

from __future__ import annotations

import asyncio
import logging

import aiomqtt
import asyncpg

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

_ATTEMPTS = 5
_TRANSIENT = (
    asyncpg.DeadlockDetectedError,
    asyncpg.SerializationError,
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
    ConnectionError,
    TimeoutError,
)

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
            raise_if_cancelling()  # one that aiomqtt's wait_for dropped while subscribing
            self.connected.set()
            backoff.reset()
            _log.info("ingest subscribed on %s", self._url)
            async for message in client.messages:
                payload = message.payload
                if not isinstance(payload, bytes | bytearray):
                    payload = str(payload).encode()
                await self._handle(str(message.topic), bytes(payload))

    async def _handle(self, topic: str, payload: bytes) -> None:
        """Hand one message to the pipeline, retrying transient database failures
        (deadlock, serialization failure, lost connection) with backoff. Anything that
        still fails is logged: the device re-sends batches the cloud never confirmed."""
        backoff = Backoff(base=0.2, cap=5.0)
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                outcome = await self._pipeline.handle(topic, payload)
            except _TRANSIENT as exc:
                if attempt == _ATTEMPTS:
                    _log.error("ingest of a message on %s failed %d times: %s", topic,
                               attempt, exc)
                    return
                await asyncio.sleep(backoff.next_delay())
            except Exception:
                _log.exception("ingest of a message on %s failed", topic)
                return
            else:
                _log.debug("%s → %s %s", topic, outcome.status, outcome.code or "")
                return
