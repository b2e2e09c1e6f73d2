"""The server's polling loops stop when cancelled, even when a wake-up (a NOTIFY) comes
in the same turn of the event loop as the cancellation. On Python 3.11,
``asyncio.wait_for`` returns the wake-up and drops the cancellation there, and a loop
built on it would run on forever (it hung ``edgesync serve``'s stop in CI)."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from edgesync.control import ControlSender
from edgesync.staging import Replayer


class _NoBroker:
    async def publish(self, topic: str, payload: bytes) -> None:
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
    loop._on_notify()  # woken and stopped in one turn
    task.cancel()
    # Bounded: the broken loop would sleep for its poll interval and poll again, forever.
    await asyncio.wait({task}, timeout=20)
    stopped = task.cancelled()
    if not stopped:
        task.cancel()
        await asyncio.wait({task}, timeout=5)
    assert stopped, "the loop went on after being cancelled"
