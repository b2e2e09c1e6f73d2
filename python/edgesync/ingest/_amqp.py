"""AMQP → ingest pipeline: workers as competing consumers of one durable quorum queue.

Devices publish over MQTT to RabbitMQ's MQTT plugin, which routes their messages into
``amq.topic``; the queue is bound there for every device-to-cloud kind, so a message
waits in it until one worker has committed it. Every worker consumes the same queue:
RabbitMQ hands each message to one of them and, when that worker dies or its connection
drops, gives its unacknowledged messages to another (a redelivery is a no-op: the ledger
answers it ``duplicate``).

Acknowledgement policy (a message is acknowledged only once it is settled):
- handled (``IngestPipeline.handle`` returned, i.e. its transaction committed, whatever
  the outcome, ``rejected`` included): ack;
- a transient database failure (connection lost, server restarting, too many
  connections, deadlock, serialization failure): retried with backoff for as long as it
  lasts, the message held (unacknowledged) meanwhile, so an outage fills the prefetch
  window and stops deliveries instead of losing or spinning on messages;
- any other error: the message is put back on the queue after a backoff, up to
  ``_ATTEMPTS`` deliveries (counted by the quorum queue's ``x-delivery-count``, so every
  worker sees the same count), then acknowledged and logged as dropped. A payload that
  fails the same way every time thus cannot circle the workers for ever; the device
  re-sends a batch whose progress the cloud never confirmed. The queue's own
  ``x-delivery-limit`` drops a message that kills workers before they can answer.

Several URLs (the nodes of a RabbitMQ cluster) are tried in turn: each connection
attempt takes the next, so losing the node a worker consumes through moves it to another
after the backoff; the quorum queue's other members go on serving it meanwhile.

Up to ``prefetch`` messages are handled at once (their batches meet in the pipeline's
group writer, which writes them in shared transactions), and the broker sends no more
than that unacknowledged: the window bounds the worker's memory, not the backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from urllib.parse import urlsplit

import aio_pika
import asyncpg
from aio_pika.abc import AbstractIncomingMessage, AbstractQueue

from edgesync.errors import ConfigError
from edgesync.fleet import DeviceResolver
from edgesync.ingest._amqp_keys import TopicResolver, amqp_binding_keys
from edgesync.ingest._pipeline import IngestPipeline
from edgesync.ingest._trace import BatchTrace
from edgesync.protocol import Backoff, raise_if_cancelling, split_urls
from edgesync.store import TRANSIENT_ERRORS

__all__ = ["AmqpIngest", "check_amqp_url", "check_amqp_urls"]

_log = logging.getLogger(__name__)

DEFAULT_QUEUE = "edgesync.ingest"
_ATTEMPTS = 5  # deliveries of a message that fails with an unexpected error
_DELIVERY_LIMIT = 20  # the queue's own bound, for messages that crash workers
# PostgreSQL down, restarting, overloaded or a lost transaction race: worth waiting for
# (batches wait in the group writer; this covers the other message kinds).
_TRANSIENT: tuple[type[BaseException], ...] = (
    *TRANSIENT_ERRORS, asyncpg.InsufficientResourcesError, asyncpg.TransactionRollbackError)


def check_amqp_url(url: str, field: str = "amqp_url") -> str:
    """``url`` when it is an ``amqp://`` or ``amqps://`` URL with a host; ConfigError
    naming ``field`` otherwise."""
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        raise ConfigError(field, f"not an AMQP URL: {url!r} ({exc})") from exc
    if parts.scheme.lower() not in {"amqp", "amqps"}:
        raise ConfigError(field, f"scheme {parts.scheme or '(none)'!r} not supported; use "
                                 "amqp://user:password@host:5672/vhost or amqps://")
    if not parts.hostname:
        raise ConfigError(field, f"no host in {url!r}")
    return url.strip()


def check_amqp_urls(urls: str | Sequence[str], field: str = "amqp_url") -> tuple[str, ...]:
    """Several AMQP URLs (a comma-separated string or a sequence), each checked by
    ``check_amqp_url``; ConfigError naming ``field`` when none is given."""
    items = split_urls(urls) if isinstance(urls, str) else list(urls)
    if not items:
        raise ConfigError(field, "names no AMQP URL")
    return tuple(check_amqp_url(url, field) for url in items)


def _display(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}:{parts.port or ''}{parts.path or '/'}"


class AmqpIngest:
    """Consume device messages from the durable quorum queue ``queue`` (declared and
    bound to ``amq.topic`` when missing) and hand each to ``pipeline``."""

    def __init__(self, pipeline: IngestPipeline, amqp_url: str | Sequence[str], *,
                 devices: DeviceResolver,
                 queue: str = DEFAULT_QUEUE, prefetch: int = 256, name: str = "",
                 trace: BatchTrace | None = None) -> None:
        if prefetch < 1:
            raise ConfigError("prefetch", f"must be at least 1, not {prefetch}")
        self._pipeline = pipeline
        self._urls = check_amqp_urls(amqp_url)
        self._turn = 0  # the next connection attempt's URL, round robin
        self._topics = TopicResolver(devices)
        self._queue = queue
        self._prefetch = prefetch
        self.name = name  # the worker's, in the connection name
        self._trace = trace  # serve --trace-batches
        self.connected = asyncio.Event()

    def __str__(self) -> str:
        nodes = ", ".join(_display(url) for url in self._urls)
        return f"{nodes} queue {self._queue}"

    async def run(self) -> None:
        """Consume until cancelled, reconnecting with backoff whenever the broker is lost."""
        backoff = Backoff()
        while True:
            try:
                await self._session(backoff)
                reason = "connection closed"
            except aio_pika.exceptions.CONNECTION_EXCEPTIONS as exc:
                raise_if_cancelling()
                reason = str(exc) or type(exc).__name__
            finally:
                self.connected.clear()
            wait = backoff.next_delay()
            _log.warning("AMQP %s: %s; reconnecting in %.1fs", self, reason, wait)
            await asyncio.sleep(wait)

    async def _session(self, backoff: Backoff) -> None:
        """One connection: declare the queue, bind it, consume."""
        # named, so an operator sees which worker holds what (management UI, rabbitmqctl)
        url = self._urls[self._turn % len(self._urls)]
        self._turn += 1
        connection = await aio_pika.connect(url, client_properties={
            "connection_name": f"edgesync-ingest {self._queue} {self.name}"})
        async with connection:
            channel = await connection.channel()
            await channel.set_qos(prefetch_count=self._prefetch)
            queue = await channel.declare_queue(
                self._queue, durable=True,
                arguments={"x-queue-type": "quorum", "x-delivery-limit": _DELIVERY_LIMIT})
            for key in amqp_binding_keys():
                await queue.bind("amq.topic", key)
            await self._consume(queue, backoff)

    async def _consume(self, queue: AbstractQueue, backoff: Backoff) -> None:
        handling: set[asyncio.Task[None]] = set()
        try:
            async with queue.iterator() as messages:
                self.connected.set()
                backoff.reset()
                _log.info("ingest consuming %s", self)
                async for message in messages:
                    task = asyncio.create_task(self._settle(message),
                                               name="edgesync.ingest.amqp.message")
                    handling.add(task)
                    task.add_done_callback(handling.discard)
        finally:
            # Stopped or disconnected: what is not acknowledged yet goes back to the
            # queue (the broker requeues it when the channel closes), committed or not.
            for task in handling:
                task.cancel()
            await asyncio.gather(*handling, return_exceptions=True)

    async def _settle(self, message: AbstractIncomingMessage) -> None:
        # (A task of its own: the stamps begun here are this message's alone.)
        stamps = self._trace.begin() if self._trace is not None else None
        backoff = Backoff(base=0.2, cap=30.0)
        while True:
            try:
                topic = await self._topics.topic(message.routing_key or "")
                if topic is None:
                    _log.warning("not a device sync message on routing key %r (dropped)",
                                 message.routing_key)
                    break
                outcome = await self._pipeline.handle(topic, message.body)
                _log.debug("%s → %s %s", topic, outcome.status, outcome.code or "")
                break
            except _TRANSIENT as exc:
                raise_if_cancelling()
                wait = backoff.next_delay()
                _log.warning("ingest of %s: %s; retrying in %.1fs", message.routing_key,
                             exc, wait)
                await asyncio.sleep(wait)
            except Exception:
                raise_if_cancelling()
                count = _deliveries(message)
                if count >= _ATTEMPTS:
                    _log.exception("ingest of %s failed %d times (dropped; the device "
                                   "re-sends what the cloud does not confirm)",
                                   message.routing_key, count)
                    break
                _log.exception("ingest of %s failed (delivery %d of %d; requeued)",
                               message.routing_key, count, _ATTEMPTS)
                await asyncio.sleep(backoff.next_delay())
                await _answer(message, ack=False)
                return
        await _answer(message, ack=True)
        if stamps is not None and self._trace is not None:
            self._trace.end(stamps)


def _deliveries(message: AbstractIncomingMessage) -> int:
    """Which delivery of the message this is (1 for the first): the quorum queue counts
    the earlier ones in ``x-delivery-count``."""
    earlier = (message.headers or {}).get("x-delivery-count")
    return 1 + (earlier if isinstance(earlier, int) else 0)


async def _answer(message: AbstractIncomingMessage, *, ack: bool) -> None:
    """Ack or requeue; when the channel is gone already, the broker redelivers anyway."""
    with contextlib.suppress(*aio_pika.exceptions.CONNECTION_EXCEPTIONS):
        if ack:
            await message.ack()
        else:
            await message.nack(requeue=True)
