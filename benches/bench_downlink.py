"""The worker's downlink: CPU per QoS 1 message, three ways, side by side in one run.

* ``aiomqtt``: ``aiomqtt.Client.publish`` with 8 in flight, as the control publisher
  did before ``PublishingClient``;
* ``paho``: every message handed to paho at once, PUBACKs awaited from ``on_publish``;
* ``edgesync``: ``protocol.PublishingClient.publish_all`` (hand-written packets).

Each publishes ``EDGESYNC_DOWNLINK_MESSAGES`` (5,000) messages of 300 bytes on 1,000
topics to the local Mosquitto (127.0.0.1:1883) and is measured by the process's own CPU
time (user + system), which the broker's work does not enter. The ways alternate, three
rounds each; the figure is the median. Smoke (CI): 200 messages, one round, and only the
check that every way got every PUBACK. Run:
``pytest benches/bench_downlink.py --benchmark-only -s``; figures in docs/benchmarks.md.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aiomqtt

from edgesync.protocol import PublishingClient

PAYLOAD = b"x" * 300
Way = Callable[[list[tuple[str, bytes]]], Awaitable[None]]


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


async def via_aiomqtt(messages: list[tuple[str, bytes]]) -> None:
    room = asyncio.Semaphore(8)
    async with aiomqtt.Client("127.0.0.1", 1883, identifier=f"dl-a-{uuid.uuid4().hex[:8]}",
                              max_inflight_messages=64,
                              max_queued_outgoing_messages=20_000) as client:
        async def one(topic: str, payload: bytes) -> None:
            async with room:
                await client.publish(topic, payload, qos=1)

        await asyncio.gather(*(one(t, p) for t, p in messages))


async def via_paho(messages: list[tuple[str, bytes]]) -> None:
    async with aiomqtt.Client("127.0.0.1", 1883, identifier=f"dl-p-{uuid.uuid4().hex[:8]}",
                              max_inflight_messages=64,
                              max_queued_outgoing_messages=20_000) as client:
        paho = client._client
        loop = asyncio.get_running_loop()
        acks: dict[int, asyncio.Future[None]] = {}

        def on_publish(_c: Any, _u: Any, mid: int, *_: Any) -> None:
            fut = acks.pop(mid, None)
            if fut is not None and not fut.done():
                fut.set_result(None)

        paho.on_publish = on_publish
        waits = []
        for topic, payload in messages:
            info = paho.publish(topic, payload, qos=1)
            if not info.is_published():
                waits.append(acks.setdefault(info.mid, loop.create_future()))
        await asyncio.gather(*waits)


async def via_edgesync(messages: list[tuple[str, bytes]]) -> None:
    async with PublishingClient("127.0.0.1", 1883,
                                client_id=f"dl-e-{uuid.uuid4().hex[:8]}") as client:
        await client.publish_all(messages)
        assert client.waiting == 0


WAYS: dict[str, Way] = {"aiomqtt": via_aiomqtt, "paho": via_paho, "edgesync": via_edgesync}


async def measure(n: int, rounds: int) -> dict[str, dict[str, float]]:
    root = f"edgesync-bench/downlink/{uuid.uuid4().hex[:8]}"
    messages = [(f"{root}/dev-{i % 1000:04d}/sync/ingest/control", PAYLOAD) for i in range(n)]
    cpu: dict[str, list[float]] = {w: [] for w in WAYS}
    wall: dict[str, list[float]] = {w: [] for w in WAYS}
    for _ in range(rounds):
        for name, way in WAYS.items():
            c0, t0 = _cpu(), time.perf_counter()
            await way(messages)
            cpu[name].append((_cpu() - c0) / n * 1e6)
            wall[name].append((time.perf_counter() - t0) / n * 1e6)
    return {w: {"cpu_us_per_message": statistics.median(cpu[w]),
                "wall_us_per_message": statistics.median(wall[w])} for w in WAYS}


def test_downlink_cpu_per_message(benchmark: Any) -> None:
    smoke = bool(benchmark.disabled)
    n = 200 if smoke else int(os.environ.get("EDGESYNC_DOWNLINK_MESSAGES", "5000"))
    results: dict[str, dict[str, float]] = {}

    def once() -> None:
        results.update(asyncio.run(measure(n, 1 if smoke else 3)))

    benchmark.pedantic(once, rounds=1, iterations=1)
    benchmark.extra_info.update(results)
    for name, r in results.items():
        print(f"{name:>9}: {r['cpu_us_per_message']:6.1f} us CPU, "
              f"{r['wall_us_per_message']:6.1f} us wall a message")
    assert set(results) == set(WAYS)
    if not smoke:
        assert results["edgesync"]["cpu_us_per_message"] < results["aiomqtt"][
            "cpu_us_per_message"], results
