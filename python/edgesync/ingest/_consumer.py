"""MQTT → ingest pipeline: concurrent, acknowledged after commit, bounded in memory.

Each message is handed to the pipeline in its own task, so the batches of many
devices meet in the group writer's shared transactions. A QoS 1 message is
acknowledged (PUBACK) only once ``IngestPipeline.handle`` returned, i.e. once the
transaction holding its effect committed; a worker killed before that leaves it
unacknowledged, and the broker delivers it again — with Mosquitto, on the worker's own
persistent session when the worker comes back (a shared subscription does not move
in-flight messages to another member).

At most ``window`` messages are in flight: past that the socket is not read (see
``protocol.ConsumingClient``), so worker memory is bounded by the window, not by the
broker's backlog. When the connection is lost, the messages in flight are abandoned
unacknowledged (their acknowledgement could not reach the broker any more); the broker
delivers them again on the next session, and the ledger makes that a no-op for any that
had committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import NoReturn

from edgesync.errors import BrokerError
from edgesync.ingest._pipeline import IngestPipeline
from edgesync.ingest._trace import BatchTrace
from edgesync.protocol import (
    Backoff,
    BrokerRotation,
    BrokerUrl,
    ConsumingClient,
    Healthy,
    MqttMessage,
    TlsFiles,
    TopicKind,
    parse_topic,
    rotation_of,
    session_loop,
    tls_context,
    worker_subscriptions,
)
from edgesync.store import TRANSIENT_ERRORS

__all__ = ["MqttIngest"]

# Messages other than batches (ACKs, observations, requests) are retried this often
# on a transient database error; their senders repeat them anyway. A batch is retried for
# as long as the database is away: acknowledged, it would be gone from the broker with
# nothing committed (the device's scope is read before the group writer, which waits out
# outages itself, when the resolver's cache of it has expired).
_ATTEMPTS = 5
_BATCH_KINDS = frozenset({TopicKind.ROWS_BATCH, TopicKind.TELEMETRY_BATCH})
# Backoff between attempts (base, cap) in seconds.
_RETRY = (0.2, 5.0)

_log = logging.getLogger(__name__)


class MqttIngest:
    def __init__(self, pipeline: IngestPipeline, url: BrokerUrl | BrokerRotation, *,
                 client_id: str,
                 tls: TlsFiles | None = None, shared_group: str | None = None,
                 window: int = 256, trace: BatchTrace | None = None) -> None:
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        self._pipeline = pipeline
        # Several URLs (a broker cluster): each connection attempt takes the next one.
        self._url = rotation_of(url)
        self._client_id = client_id
        self._tls = tls
        self._shared_group = shared_group
        self._window = window
        self._trace = trace  # serve --trace-batches
        self.connected = asyncio.Event()
        # The most messages ever in flight at once (the window holds: tests, metrics).
        self.max_in_flight = 0

    async def run(self) -> NoReturn:
        await session_loop(f"ingest from {self._url}", self._session, logger=_log)

    async def _session(self, healthy: Healthy) -> None:
        url = self._url.take()
        client = ConsumingClient(
            url.host, url.port, client_id=self._client_id, username=url.username,
            password=url.password, window=self._window,
            tls_context=tls_context(url, self._tls))
        tasks: set[asyncio.Task[None]] = set()
        try:
            async with client:
                # Reading starts before subscribing: a persistent session's messages
                # arrive right after the CONNACK, and while they fill the window no
                # SUBACK is read. The connection may also be lost while subscribing:
                # the reader then ends first, and so does the session.
                reader = asyncio.create_task(self._read(client, tasks))
                try:
                    if client.session_present:
                        # The session's subscriptions hold already; renewing them waits
                        # for a SUBACK queued behind the whole backlog.
                        healthy()
                        self.connected.set()
                        _log.info("ingest subscribed on %s (session resumed)", url)
                    await _first(reader, self._subscribe(client))
                    healthy()
                    if not self.connected.is_set():
                        self.connected.set()
                        _log.info("ingest subscribed on %s", url)
                    await reader
                finally:
                    reader.cancel()
                    with contextlib.suppress(BaseException):
                        await reader
        finally:
            self.connected.clear()
            # Abandoned unacknowledged: the broker sends them again (see above).
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _subscribe(self, client: ConsumingClient) -> None:
        await client.subscribe(worker_subscriptions(self._shared_group))

    async def _read(self, client: ConsumingClient, tasks: set[asyncio.Task[None]]) -> None:
        """Until the connection is lost (``receive`` raises why)."""
        while True:
            for message in await client.receive():
                task = asyncio.create_task(self._process(client, message))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            self.max_in_flight = max(self.max_in_flight, client.most_unfinished)

    async def _process(self, client: ConsumingClient, message: MqttMessage) -> None:
        # (A task of its own: the stamps begun here are this message's alone.)
        stamps = self._trace.begin() if self._trace is not None else None
        try:
            await self._handle(message.topic, message.payload)
        except asyncio.CancelledError:
            client.finished(message, ack=False)  # abandoned: the broker sends it again
            raise
        client.finished(message)
        if stamps is not None and self._trace is not None:
            self._trace.end(stamps)

    async def _handle(self, topic: str, payload: bytes) -> None:
        """Hand one message to the pipeline. A batch waits out a database outage for as
        long as it lasts (unacknowledged meanwhile, so the window fills and reading
        stops); other messages are retried a few times. An unexpected error is logged and
        the message acknowledged: the device re-sends what the cloud never confirmed."""
        backoff = Backoff(base=_RETRY[0], cap=_RETRY[1])
        ref = parse_topic(topic)
        batch = ref is not None and ref.kind in _BATCH_KINDS
        attempt = 0
        while True:
            attempt += 1
            try:
                outcome = await self._pipeline.handle(topic, payload)
            except TRANSIENT_ERRORS as exc:
                if batch:
                    wait = backoff.next_delay()
                    if attempt == _ATTEMPTS:  # once, not at every attempt
                        _log.warning("ingest of a batch on %s waits for the database (%s); "
                                     "retrying every %.1fs at most", topic, exc, _RETRY[1])
                    await asyncio.sleep(wait)
                    continue
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


async def _first(reader: asyncio.Task[None], work: Awaitable[None]) -> None:
    """Run ``work`` unless ``reader`` ends first (its error, usually a lost connection,
    is raised then)."""
    task = asyncio.ensure_future(work)
    try:
        await asyncio.wait([reader, task], return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            reader.result()  # raises the reader's error
            raise BrokerError("the connection ended while subscribing")
        task.result()
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
