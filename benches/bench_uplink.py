"""The worker's uplink: CPU per QoS 1 message received and acknowledged, side by side.

* ``aiomqtt``: a plain ``aiomqtt.Client`` iterating ``messages`` (paho acknowledges each
  message as it reads it; no window): the library as it comes;
* ``edgesync``: ``protocol.ConsumingClient`` as ``MqttIngest`` uses it (hand-written
  packets, PUBACK on ``finished``, window of 256).

``protocol.AckingClient`` (aiomqtt and paho reached into, as ``MqttIngest`` used before
``ConsumingClient``) was measured here before it was removed: docs/benchmarks.md.

Each drains a backlog of ``EDGESYNC_UPLINK_MESSAGES`` (10,000) messages of 1,000 bytes on
1,000 topics, queued for its persistent session on a private Mosquitto (no limit on
what is queued or in flight, as in the fan-in bench), acknowledging each message as it
comes (no pipeline: only the client's cost). The figure is this process's CPU time
(``time.process_time``: user + system, all threads; the broker's is not in it) from
connecting until the last message was acknowledged and the connection closed;
publishing the backlog and making the session are not in it. After each drain the
session is opened again: nothing may come back (every message was acknowledged). The
ways alternate, three rounds each; the figure is the median. Smoke (CI): 200 messages,
one round, and only that check. Run: ``pytest benches/bench_uplink.py --benchmark-only
-s``; figures in docs/benchmarks.md, "Uplink".
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiomqtt
from fanin_kit import Broker

from edgesync.protocol import BrokerUrl, ConsumingClient, PublishingClient

PAYLOAD = b"x" * 1000
WINDOW = 256
Way = Callable[[BrokerUrl, str, int], Awaitable[None]]


async def via_aiomqtt(url: BrokerUrl, client_id: str, n: int) -> None:
    async with aiomqtt.Client(url.host, url.port, identifier=client_id,
                              clean_session=False) as client:
        got = 0
        async for _message in client.messages:
            got += 1
            if got == n:
                break


async def via_edgesync(url: BrokerUrl, client_id: str, n: int) -> None:
    async with ConsumingClient(url.host, url.port, client_id=client_id,
                               window=WINDOW) as client:
        got = 0
        while got < n:
            for message in await client.receive():
                client.finished(message)
                got += 1


WAYS: dict[str, Way] = {"aiomqtt": via_aiomqtt, "edgesync": via_edgesync}


async def _session(url: BrokerUrl, client_id: str, topic_filter: str) -> None:
    """The worker's persistent session, subscribed, then left: the backlog queues there."""
    async with aiomqtt.Client(url.host, url.port, identifier=client_id,
                              clean_session=False) as client:
        await client.subscribe(topic_filter, qos=1)


async def _leftover(url: BrokerUrl, client_id: str) -> int:
    """Messages the session gives again (none when every one was acknowledged)."""
    async with aiomqtt.Client(url.host, url.port, identifier=client_id,
                              clean_session=False) as client:
        got = 0
        try:
            async with asyncio.timeout(0.5):
                async for _message in client.messages:
                    got += 1
        except TimeoutError:
            pass
    async with aiomqtt.Client(url.host, url.port, identifier=client_id, clean_session=True):
        pass  # the session goes
    return got


async def measure(n: int, rounds: int) -> dict[str, dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="edgesync-uplink-") as work:
        broker = Broker(Path(work))
        await broker.start()
        try:
            url = BrokerUrl("127.0.0.1", broker.port, tls=False)
            return await _rounds(url, n, rounds)
        finally:
            broker.stop()


async def _rounds(url: BrokerUrl, n: int, rounds: int) -> dict[str, dict[str, Any]]:
    root = f"edgesync-bench/uplink/{uuid.uuid4().hex[:8]}"
    messages = [(f"{root}/dev-{i % 1000:04d}/sync/rows/batch", PAYLOAD) for i in range(n)]
    cpu: dict[str, list[float]] = {w: [] for w in WAYS}
    async with PublishingClient(url.host, url.port, client_id=f"{root}-devices") as devices:
        for r in range(rounds):
            for name, way in WAYS.items():
                client_id = f"ul-{name}-{r}-{uuid.uuid4().hex[:6]}"
                await _session(url, client_id, f"{root}/+/sync/rows/batch")
                await devices.publish_all(messages)
                c0 = time.process_time()
                await way(url, client_id, n)
                cpu[name].append((time.process_time() - c0) / n * 1e6)
                left = await _leftover(url, client_id)
                assert left == 0, f"{name}: {left} message(s) were not acknowledged"
    return {w: {"cpu_us_per_message": statistics.median(cpu[w]),
                "cpu_us_per_message_rounds": cpu[w]} for w in WAYS}


def test_uplink_cpu_per_message(benchmark: Any) -> None:
    smoke = bool(benchmark.disabled)
    n = 200 if smoke else int(os.environ.get("EDGESYNC_UPLINK_MESSAGES", "10000"))
    results: dict[str, dict[str, Any]] = {}

    def once() -> None:
        results.update(asyncio.run(measure(n, 1 if smoke else 3)))

    benchmark.pedantic(once, rounds=1, iterations=1)
    benchmark.extra_info.update(results)
    for name, r in results.items():
        rounds = ", ".join(f"{c:.1f}" for c in r["cpu_us_per_message_rounds"])
        print(f"{name:>9}: {r['cpu_us_per_message']:6.1f} us CPU a message ({rounds})")
    assert set(results) == set(WAYS)
    if not smoke:
        assert results["edgesync"]["cpu_us_per_message"] < results["aiomqtt"][
            "cpu_us_per_message"], results
