"""The AMQP ingest source on the real RabbitMQ: devices publish over its MQTT plugin,
the worker consumes the durable quorum queue bound to ``amq.topic`` and hands each
message to the ingest pipeline, acknowledging only what is settled."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import aio_pika
import asyncpg
import pytest
from kits.e2e_kit import eventually

from edgesync import _core, fleet
from edgesync.fleet import DeviceResolver, DeviceScope
from edgesync.ingest import AmqpIngest, IngestOutcome, IngestPipeline
from edgesync.protocol import TopicKind, mqtt_client, parse_broker_url, topic_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]


@contextlib.asynccontextmanager
async def consuming(ingest: AmqpIngest, amqp_url: str, queue: str
                    ) -> AsyncIterator[asyncio.Task[None]]:
    """``ingest`` running until the block ends; its queue deleted afterwards."""
    task = asyncio.create_task(ingest.run(), name="test.amqp.ingest")
    try:
        await asyncio.wait_for(ingest.connected.wait(), 30)
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        connection = await aio_pika.connect(amqp_url)
        async with connection:
            channel = await connection.channel()
            await channel.queue_delete(queue)


async def ready_messages(amqp_url: str, queue: str) -> int:
    """Messages waiting in ``queue`` (not those delivered and unacknowledged)."""
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        declared = await channel.declare_queue(queue, passive=True)
        count = declared.declaration_result.message_count
        assert count is not None
        return count


async def publish(plugin_mqtt_url: str, unique: str, *messages: tuple[str, bytes]) -> None:
    async with mqtt_client(parse_broker_url(plugin_mqtt_url),
                           identifier=f"dev-pub-{unique}-{uuid.uuid4().hex[:6]}",
                           clean_session=True) as client:
        for topic, payload in messages:
            await client.publish(topic, payload, qos=1)


async def add(pool: asyncpg.Pool, project: str, slug: str, name: str) -> DeviceScope:
    async with pool.acquire() as conn:
        return await fleet.add_device(conn, project=project, name=name, topic_slug=slug)


async def staged_rows(pool: asyncpg.Pool, device: DeviceScope) -> int:
    n = await pool.fetchval("SELECT coalesce(sum(staged_rows), 0) FROM edge_table_lineages "
                            "WHERE device_id = $1", device.device_id)
    return int(n)


def rows_batch(batches: Callable[..., Any], n: int) -> bytes:
    factory = batches()
    return factory.payload(factory.rows(*[
        ("insert", {"id": i, "mode": "auto", "setpoint": i / 2}) for i in range(n)]))


async def test_dotted_device_topics_through_the_plugin_reach_the_pipeline(
        pool: asyncpg.Pool, amqp_url: str, plugin_mqtt_url: str, unique: str,
        batches: Callable[..., Any]) -> None:
    """The plugin turns ``plant.x/gw.1/sync/rows/batch`` into a routing key with four
    more words: the queue still gets it, and the worker gives it to the right device
    (the registry tells the splits apart), another with an empty slug too."""
    dotted = await add(pool, f"amqp-a-{unique}", f"plant.{unique}", f"gw.{unique}.1")
    plain = await add(pool, f"amqp-b-{unique}", "", f"gw-{unique}")
    # A compressed batch (docs/protocol.md) comes through the plugin and the queue as is.
    zipped = await add(pool, f"amqp-z-{unique}", f"zipped-{unique}", "gw")
    queue = f"edgesync.test.{unique}"
    pipeline = IngestPipeline(pool)
    ingest = AmqpIngest(pipeline, amqp_url, devices=DeviceResolver(pool), queue=queue)
    async with consuming(ingest, amqp_url, queue):
        await publish(plugin_mqtt_url, unique,
                      (topic_for(dotted.root_topic, TopicKind.ROWS_BATCH), rows_batch(batches, 3)),
                      (topic_for(plain.root_topic, TopicKind.ROWS_BATCH), rows_batch(batches, 2)),
                      (f"nobody.{unique}/gw/sync/rows/batch", rows_batch(batches, 1)),
                      (topic_for(zipped.root_topic, TopicKind.ROWS_BATCH),
                       _core.compress_blob(rows_batch(batches, 4), 3)))
        await eventually(lambda: _equals(staged_rows(pool, dotted), 3), what="dotted staged")
        await eventually(lambda: _equals(staged_rows(pool, zipped), 4), what="zipped staged")
        await eventually(lambda: _equals(staged_rows(pool, plain), 2), what="plain staged")

        async def unknown_answered() -> bool:
            return pipeline.counters["unknown_device"] == 1

        await eventually(unknown_answered, what="unknown device rejected")
        assert pipeline.counters["schema_review"] == 3
        assert await ready_messages(amqp_url, queue) == 0


async def _equals(value: Any, want: int) -> bool:
    return bool(await value == want)


class FaultyPipeline(IngestPipeline):
    """The real pipeline, with faults on two devices: ``broken`` always raises an
    unexpected error, ``flaky`` loses its database connection twice."""

    def __init__(self, pool: asyncpg.Pool, broken: str, flaky: str) -> None:
        super().__init__(pool)
        self.broken, self.flaky = broken, flaky
        self.calls: collections.Counter[str] = collections.Counter()

    async def handle(self, topic: str, payload: bytes, *,
                     max_payload_bytes: int | None = None) -> IngestOutcome:
        self.calls[topic] += 1
        if topic.startswith(self.broken):
            raise ValueError("a bug that every delivery hits")
        if topic.startswith(self.flaky) and self.calls[topic] <= 2:
            raise asyncpg.ConnectionDoesNotExistError("connection was closed")
        return await super().handle(topic, payload, max_payload_bytes=max_payload_bytes)


async def test_transient_failures_are_retried_and_a_poison_message_dropped_after_5(
        pool: asyncpg.Pool, amqp_url: str, plugin_mqtt_url: str, unique: str,
        batches: Callable[..., Any]) -> None:
    broken = await add(pool, f"amqp-c-{unique}", f"broken-{unique}", "gw")
    flaky = await add(pool, f"amqp-d-{unique}", f"flaky-{unique}", "gw")
    queue = f"edgesync.test.{unique}"
    pipeline = FaultyPipeline(pool, broken.root_topic, flaky.root_topic)
    ingest = AmqpIngest(pipeline, amqp_url, devices=DeviceResolver(pool), queue=queue)
    broken_topic = topic_for(broken.root_topic, TopicKind.ROWS_BATCH)
    flaky_topic = topic_for(flaky.root_topic, TopicKind.ROWS_BATCH)
    async with consuming(ingest, amqp_url, queue) as running:
        await publish(plugin_mqtt_url, unique, (broken_topic, rows_batch(batches, 1)),
                      (flaky_topic, rows_batch(batches, 4)))
        # the transient error: held and retried by the same worker until it went through
        await eventually(lambda: _equals(staged_rows(pool, flaky), 4), what="flaky staged")
        assert pipeline.calls[flaky_topic] == 3

        async def gave_up() -> bool:
            return pipeline.calls[broken_topic] >= 5

        # the unexpected one: back to the queue (redelivered, counted by the broker)
        # four times, then acknowledged as dropped on its fifth delivery
        await eventually(gave_up, what="poison message delivered 5 times")

        async def settled() -> bool:
            return await ready_messages(amqp_url, queue) == 0

        await eventually(settled, what="queue empty")
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        assert pipeline.calls[broken_topic] == 5
        # stopped: nothing unacknowledged went back to the queue either
        assert await ready_messages(amqp_url, queue) == 0


def _close_connection_named(name: str) -> bool:
    """Have RabbitMQ close the client connection called ``name`` (as a broker restart or
    a network cut would drop it), this test's own connection only."""
    listed = subprocess.run(["rabbitmqctl", "-q", "list_connections", "pid",
                             "client_properties"], capture_output=True, text=True,
                            timeout=60, check=True).stdout
    pids = [line.split("\t", 1)[0] for line in listed.splitlines() if name in line]
    for pid in pids:
        subprocess.run(["rabbitmqctl", "-q", "close_connection", pid, "test: broker lost"],
                       capture_output=True, text=True, timeout=60, check=True)
    return bool(pids)


async def test_the_consumer_reconnects_when_the_broker_drops_it(
        pool: asyncpg.Pool, amqp_url: str, plugin_mqtt_url: str, unique: str,
        batches: Callable[..., Any], caplog: pytest.LogCaptureFixture) -> None:
    before = await add(pool, f"amqp-e-{unique}", f"before-{unique}", "gw")
    after = await add(pool, f"amqp-f-{unique}", f"after-{unique}", "gw")
    queue = f"edgesync.test.{unique}"
    ingest = AmqpIngest(IngestPipeline(pool), amqp_url, devices=DeviceResolver(pool),
                        queue=queue, name=f"reconnect-{unique}")
    async with consuming(ingest, amqp_url, queue):
        await publish(plugin_mqtt_url, unique,
                      (topic_for(before.root_topic, TopicKind.ROWS_BATCH),
                       rows_batch(batches, 2)))
        await eventually(lambda: _equals(staged_rows(pool, before), 2), what="before staged")
        assert await asyncio.to_thread(_close_connection_named, f"reconnect-{unique}")

        def reconnecting() -> bool:
            return any("reconnecting" in r.getMessage() for r in caplog.records
                       if r.name == "edgesync.ingest._amqp")

        await eventually(lambda: _true(reconnecting()), what="connection loss noticed")
        await asyncio.wait_for(ingest.connected.wait(), 30)
        # published while the worker may still be reconnecting: the queue holds it
        await publish(plugin_mqtt_url, unique,
                      (topic_for(after.root_topic, TopicKind.ROWS_BATCH),
                       rows_batch(batches, 3)))
        await eventually(lambda: _equals(staged_rows(pool, after), 3), what="after staged")


async def _true(value: bool) -> bool:
    return value
