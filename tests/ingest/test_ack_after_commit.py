"""The MQTT consumer acknowledges a message only once the pipeline returned (its
transaction committed), and holds no more than its window in flight, whatever the
broker has queued: counted on a private Mosquitto with no in-flight or queue limits."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from broker.broker_helpers import Mosquitto, free_port, until

from edgesync.ingest import IngestOutcome, MqttIngest, OutcomeStatus
from edgesync.protocol import BrokerUrl, mqtt_client

WINDOW = 8
MESSAGES = 60


class Gate:
    """A pipeline that holds every message until released."""

    def __init__(self, *, open_: bool = False) -> None:
        self.open = asyncio.Event()
        if open_:
            self.open.set()
        self.seen: list[bytes] = []
        self.done: list[bytes] = []

    async def handle(self, topic: str, payload: bytes) -> IngestOutcome:
        self.seen.append(payload)
        await self.open.wait()
        self.done.append(payload)
        return IngestOutcome(OutcomeStatus.MATERIALIZED)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[BrokerUrl]:
    port = free_port()
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\n"
                    "max_inflight_messages 0\nmax_queued_messages 0\npersistence false\n")
    server = Mosquitto(conf, tmp_path / "mosquitto.log")
    await server.start([port])
    try:
        yield BrokerUrl(host="127.0.0.1", port=port, tls=False)
    finally:
        await server.stop()


@contextlib.asynccontextmanager
async def consuming(gate: Gate, url: BrokerUrl, client_id: str) -> AsyncIterator[MqttIngest]:
    ingest = MqttIngest(gate, url, client_id=client_id, window=WINDOW)  # type: ignore[arg-type]
    task = asyncio.create_task(ingest.run())
    try:
        async with asyncio.timeout(30):
            await ingest.connected.wait()
        yield ingest
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def publish(url: BrokerUrl, n: int) -> list[bytes]:
    payloads = [f"batch-{i}".encode() for i in range(n)]
    async with mqtt_client(url, identifier="ack-test-device", clean_session=True) as client:
        for p in payloads:
            await client.publish("slug/gw-1/sync/rows/batch", p, qos=1)
    return payloads


async def test_unacknowledged_until_handled_and_the_window_holds(broker: BrokerUrl) -> None:
    held = Gate()
    async with consuming(held, broker, "worker-ack") as ingest:  # persistent session
        sent = await publish(broker, MESSAGES)
        await until(lambda: _true(len(held.seen) >= WINDOW))
        # The broker has 60 for us and sets no limit: only the window stops them.
        await asyncio.sleep(0.5)
        assert WINDOW <= ingest.max_in_flight <= WINDOW + 2
        assert len(held.seen) <= WINDOW + 2
        assert not held.done
    # Stopped with nothing handled, so nothing was acknowledged: the same session gets
    # every message again, the held ones included.
    passing = Gate(open_=True)
    async with consuming(passing, broker, "worker-ack") as ingest:
        await until(lambda: _true(set(passing.done) == set(sent)))
        assert ingest.max_in_flight <= WINDOW + 2
    # All handled and acknowledged this time: a third session gets nothing back.
    after = Gate(open_=True)
    async with consuming(after, broker, "worker-ack"):
        marker = await publish(broker, 1)
        await until(lambda: _true(marker[0] in after.done))
        assert after.done == marker


async def _true(value: bool) -> bool:
    return value
