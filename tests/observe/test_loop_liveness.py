"""Every loop of ``protocol/_loop.py`` records its state under the task running it:
``starting`` until its first success, ``up`` after one, ``retrying`` (with the error)
after a failure, and ``up`` again once it recovers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest
from kits.e2e_kit import eventually

from edgesync.protocol import (
    Backoff,
    Healthy,
    LoopStatus,
    loop_state,
    periodic_loop,
    session_loop,
)

LIMIT = 30  # hang guard, never a timing assertion
LOG = logging.getLogger("edgesync.test.liveness")


async def until(check: Callable[[], bool], what: str) -> None:
    async def probe() -> bool:
        await asyncio.sleep(0.001)
        return check()

    await eventually(probe, LIMIT, what)


async def test_a_periodic_loop_goes_starting_retrying_up() -> None:
    go_on = asyncio.Event()
    calls = 0

    async def round_() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            await go_on.wait()
            raise OSError("database away")

    task = asyncio.create_task(periodic_loop("sweep", round_, interval=3600, logger=LOG,
                                             backoff=Backoff(base=0.001, cap=0.002)))
    try:
        await until(lambda: calls == 1, "first round")
        state = loop_state(task)
        assert state is not None and state.name == "sweep"
        assert state.status is LoopStatus.STARTING
        go_on.set()
        await until(lambda: calls == 2, "second round")
        await until(lambda: state.status is LoopStatus.UP, "up")
        assert state.failures == 0
        # The failure was recorded on the way (its text kept for /readyz).
        assert state.last_error == "OSError: database away"
    finally:
        task.cancel()
        await asyncio.wait({task}, timeout=LIMIT)


async def test_a_failing_session_is_retrying_with_its_error(
        caplog: pytest.LogCaptureFixture) -> None:
    attempts = 0

    async def session(healthy: Healthy) -> None:
        nonlocal attempts
        attempts += 1
        raise ConnectionRefusedError("broker down")

    with caplog.at_level(logging.WARNING, logger=LOG.name):
        task = asyncio.create_task(session_loop("ingest", session, logger=LOG,
                                                backoff=Backoff(base=0.001, cap=0.002)))
        try:
            await until(lambda: attempts >= 3, "three attempts")
            state = loop_state(task)
            assert state is not None
            assert state.status is LoopStatus.RETRYING
            assert state.failures >= 2
            assert state.last_error == "ConnectionRefusedError: broker down"
        finally:
            task.cancel()
            await asyncio.wait({task}, timeout=LIMIT)


async def test_a_task_without_a_loop_has_no_state() -> None:
    task = asyncio.create_task(asyncio.sleep(0))
    await task
    assert loop_state(task) is None
