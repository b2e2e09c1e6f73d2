"""The server's loops stop when cancelled even when Python 3.11's ``asyncio.wait_for``
drops the cancellation: it returns a result that comes in the same turn (a NOTIFY
waking a poll loop, a PUBACK in aiomqtt) and forgets the cancel. That hung
``edgesync serve``'s stop in CI: the progress reporter, its stop dropped during one
publish, then waited in the next for a connection the stopped publisher never made."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

import asyncpg
import pytest

from edgesync.control import ControlSender, MqttPublisher
from edgesync.ingest import Replayer
from edgesync.protocol import parse_broker_url


class _NoBroker:
    async def publish(self, topic: str, payload: bytes) -> None:
        raise AssertionError("the loop's round does nothing here")

    async def publish_all(self, messages: Sequence[tuple[str, bytes]]) -> None:
        raise AssertionError("the loop's round does nothing here")


# Each round does nothing: the other tests' work in the shared database (a due control,
# a pending replay) must not end the loop some other way than by the cancellation.
class _Replayer(Replayer):
    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__(pool, poll_interval=60)
        self.rounds = asyncio.Event()

    async def drain_pending(self, **kw: object) -> int:
        self.rounds.set()
        return 0


class _Sender(ControlSender):
    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__(pool, _NoBroker(), poll_interval=60)
        self.rounds = asyncio.Event()

    async def send_due(self) -> int:
        self.rounds.set()
        return 0


@pytest.mark.parametrize("make", [_Replayer, _Sender], ids=["replayer", "control-sender"])
async def test_a_wake_up_does_not_swallow_the_stop(pool: asyncpg.Pool, make: type) -> None:
    loop = make(pool)
    task = asyncio.create_task(loop.run())
    async with asyncio.timeout(30):  # hang guard, not a timing assertion
        await loop.rounds.wait()
    for _ in range(5):  # let it reach its wait for a wake-up
        await asyncio.sleep(0)
    assert not task.done()
    loop.wake.set()  # woken and stopped in one turn
    task.cancel()
    # Bounded: the broken loop would sleep for its poll interval and poll again, forever.
    await asyncio.wait({task}, timeout=20)
    stopped = task.cancelled()
    if not stopped:
        task.cancel()
        await asyncio.wait({task}, timeout=5)
    assert stopped, "the loop went on after being cancelled"


async def test_a_dropped_stop_does_not_wait_for_a_stopped_publisher(mqtt_url: str) -> None:
    publisher = MqttPublisher(parse_broker_url(mqtt_url), client_id="never-connects")

    async def stop_dropped_then_publish() -> None:
        me = asyncio.current_task()
        assert me is not None
        me.cancel()
        # What wait_for does with the cancel when the result comes in the same turn:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0)
        await publisher.publish("t/sync/ingest/control", b"{}")

    task = asyncio.create_task(stop_dropped_then_publish())
    await asyncio.wait({task}, timeout=10)  # bounded: the old publish waited forever
    stopped = task.cancelled()
    if not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=5)
    assert stopped, "publish waited for a connection while its task was being cancelled"
