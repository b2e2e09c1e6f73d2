"""The reconnecting-loop helper (``edgesync.protocol``: ``periodic_loop``,
``session_loop``, ``listen_loop``): any failure is logged and retried with backoff, a
success resets the backoff, a dead LISTEN connection is replaced, and cancellation
stops a loop even when Python 3.11's ``wait_for`` swallowed it on the way."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any, NoReturn

import asyncpg
import pytest

from edgesync.protocol import Backoff, Healthy, listen_loop, periodic_loop, session_loop

LOG = logging.getLogger("edgesync.test.loop")
LIMIT = 30  # hang guard of every wait below, never a timing assertion


class RecordingBackoff(Backoff):
    """Tiny delays, and which attempt each one was for."""

    def __init__(self) -> None:
        super().__init__(base=0.001, cap=0.004)
        self.attempts: list[int] = []

    def next_delay(self) -> float:
        self.attempts.append(self.attempt)
        return super().next_delay()


async def stopped(task: asyncio.Task[Any]) -> bool:
    """Cancel ``task``; True when it ended cancelled (bounded: a broken loop goes on)."""
    task.cancel()
    await asyncio.wait({task}, timeout=LIMIT)
    if not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=5)
        return False
    return task.cancelled()


def swallow_a_stop() -> contextlib.AbstractAsyncContextManager[None]:
    """What Python 3.11's ``wait_for`` does when the result comes in the same turn as
    the cancel: the task is being cancelled, but the CancelledError never arrives."""

    @contextlib.asynccontextmanager
    async def swallowed() -> AsyncIterator[None]:
        me = asyncio.current_task()
        assert me is not None
        me.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0)
        yield

    return swallowed()


async def test_a_failing_round_is_logged_and_retried_with_growing_backoff(
        caplog: pytest.LogCaptureFixture) -> None:
    backoff = RecordingBackoff()
    calls = 0
    done = asyncio.Event()

    async def round_() -> None:
        nonlocal calls
        calls += 1
        if calls <= 4:
            raise asyncpg.InternalClientError("cannot switch to state 12")
        done.set()

    with caplog.at_level(logging.DEBUG, logger=LOG.name):
        task = asyncio.create_task(periodic_loop("sweep", round_, interval=3600,
                                                 backoff=backoff, logger=LOG))
        async with asyncio.timeout(LIMIT):
            await done.wait()
        assert await stopped(task)
    assert backoff.attempts == [0, 1, 2, 3]  # each failure waited the next, longer delay
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage().split(";")[0] for r in warnings] == \
        ["sweep: InternalClientError: cannot switch to state 12"] * 4
    # The traceback: once at WARNING (third failure in a row), else at DEBUG.
    assert [r.exc_info is not None for r in warnings] == [False, False, True, False]
    assert sum(r.levelno == logging.DEBUG and r.exc_info is not None
               for r in caplog.records) == 3
    assert "sweep: recovered after 4 failure(s)" in caplog.text


async def test_success_resets_the_backoff() -> None:
    backoff = RecordingBackoff()
    script = iter([False, False, True, False, True])  # False: the round fails
    finished = asyncio.Event()
    wake = asyncio.Event()

    async def round_() -> None:
        ok = next(script, None)
        if ok is None:
            finished.set()
            return
        wake.set()  # no interval to wait out between the rounds
        if not ok:
            raise OSError("database down")

    task = asyncio.create_task(periodic_loop("rounds", round_, interval=3600, wake=wake,
                                             backoff=backoff, logger=LOG))
    async with asyncio.timeout(LIMIT):
        await finished.wait()
    assert await stopped(task)
    # Two failures back off 0, 1; the success resets; the next failure starts at 0 again.
    assert backoff.attempts == [0, 1, 0]
    assert backoff.attempt == 0


async def test_a_session_that_fails_reconnects_and_healthy_resets_the_backoff(
        caplog: pytest.LogCaptureFixture) -> None:
    backoff = RecordingBackoff()
    sessions = 0
    up = asyncio.Event()

    async def session(healthy: Healthy) -> None:
        nonlocal sessions
        sessions += 1
        if sessions in (1, 2):
            raise ConnectionRefusedError("broker down")  # never got up
        if sessions == 3:
            healthy()
            raise ValueError("a handler's bug")  # up, then lost
        healthy()
        up.set()
        await asyncio.Event().wait()  # connected for good

    with caplog.at_level(logging.INFO, logger=LOG.name):
        task = asyncio.create_task(session_loop("link", session, backoff=backoff, logger=LOG))
        async with asyncio.timeout(LIMIT):
            await up.wait()
        assert await stopped(task)
    assert backoff.attempts == [0, 1, 0]
    assert "link: ConnectionRefusedError: broker down; reconnecting in" in caplog.text
    assert "link: ValueError: a handler's bug; reconnecting in" in caplog.text


async def test_a_cancelled_error_that_is_not_ours_is_a_failure_like_another() -> None:
    calls = 0
    done = asyncio.Event()

    async def round_() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise asyncio.CancelledError  # a future cancelled under us, the task is not
        done.set()

    task = asyncio.create_task(periodic_loop("r", round_, interval=3600,
                                             backoff=RecordingBackoff(), logger=LOG))
    async with asyncio.timeout(LIMIT):
        await done.wait()
    assert not task.done()
    assert await stopped(task)


@pytest.mark.parametrize("then", ["returns", "fails"])
async def test_a_stop_swallowed_in_a_round_still_stops_the_loop(then: str) -> None:
    rounds = 0

    async def round_() -> None:
        nonlocal rounds
        rounds += 1
        async with swallow_a_stop():
            pass
        if then == "fails":
            raise OSError("and aiomqtt turned it into an error")

    task = asyncio.create_task(periodic_loop("r", round_, interval=3600,
                                             backoff=RecordingBackoff(), logger=LOG))
    await asyncio.wait({task}, timeout=LIMIT)  # bounded: the broken loop sleeps an hour
    ended = task.done() and task.cancelled()
    if not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=5)
    assert ended, "the loop went on after its task was cancelled"
    assert rounds == 1


async def test_a_stop_swallowed_while_connecting_does_not_start_the_session_wait() -> None:
    sessions = 0

    async def session(healthy: Healthy) -> None:
        nonlocal sessions
        sessions += 1
        async with swallow_a_stop():  # the connect's wait_for
            pass
        healthy()
        await asyncio.Event().wait()  # messages of a loop that was stopped: forever

    task = asyncio.create_task(session_loop("s", session, backoff=RecordingBackoff(),
                                            logger=LOG))
    await asyncio.wait({task}, timeout=LIMIT)
    ended = task.done() and task.cancelled()
    if not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=5)
    assert ended, "the session waited for messages while its task was being cancelled"
    assert sessions == 1


async def test_a_stop_during_the_backoff_wait_stops_the_loop() -> None:
    failed = asyncio.Event()

    async def round_() -> NoReturn:
        failed.set()
        raise OSError("down")

    slow = Backoff(base=3600, cap=3600)
    task = asyncio.create_task(periodic_loop("r", round_, interval=1, backoff=slow,
                                             logger=LOG))
    async with asyncio.timeout(LIMIT):
        await failed.wait()
    await asyncio.sleep(0)
    assert await stopped(task)


class RecordingPool:
    """The test pool, remembering each connection handed out."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self.conns: list[Any] = []

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Any]:
        async with self.pool.acquire() as conn:
            self.conns.append(conn)
            yield conn


async def test_listen_loop_takes_a_new_connection_when_its_listener_dies(
        pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture) -> None:
    channel = f"edgesync_test_{uuid.uuid4().hex[:8]}"
    recording = RecordingPool(pool)
    rounds = asyncio.Queue[int]()
    count = 0

    async def round_() -> None:
        nonlocal count
        count += 1
        rounds.put_nowait(count)

    async def next_round() -> int:
        async with asyncio.timeout(LIMIT):
            return await rounds.get()

    with caplog.at_level(logging.WARNING, logger=LOG.name):
        task = asyncio.create_task(listen_loop(
            "replay", recording, channel, round_,  # type: ignore[arg-type]
            poll=3600, backoff=RecordingBackoff(), logger=LOG))
        assert await next_round() == 1  # at start
        await pool.execute(f"NOTIFY {channel}")
        assert await next_round() == 2  # on a NOTIFY (the poll is an hour)
        first = recording.conns[0]
        pid = first.get_server_pid()
        assert await pool.fetchval("SELECT pg_terminate_backend($1)", pid)
        assert await next_round() == 3  # the catch-up round on the new connection
        assert len(recording.conns) == 2
        second = recording.conns[1]
        assert second.get_server_pid() != pid
        await pool.execute(f"NOTIFY {channel}")
        assert await next_round() == 4  # the new connection LISTENs
        assert await stopped(task)
    assert f"replay: StoreError: the connection listening on {channel} was lost" \
        in caplog.text


async def test_listen_loop_retries_a_failing_round_on_a_new_connection(
        pool: asyncpg.Pool) -> None:
    channel = f"edgesync_test_{uuid.uuid4().hex[:8]}"
    recording = RecordingPool(pool)
    calls = 0
    done = asyncio.Event()

    async def round_() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise asyncpg.CannotConnectNowError("the database system is starting up")
        done.set()

    task = asyncio.create_task(listen_loop(
        "sender", recording, channel, round_,  # type: ignore[arg-type]
        poll=3600, backoff=RecordingBackoff(), logger=LOG))
    async with asyncio.timeout(LIMIT):
        await done.wait()
    assert len(recording.conns) == 2
    assert await stopped(task)
