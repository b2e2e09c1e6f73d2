"""The agent's lifecycle is one state (``AgentLifecycle``): NEW → OPENING → OPEN ⇄
RUNNING → STOPPING → CLOSED. Using an agent out of order raises ``AgentLifecycleError``
(a ``RuntimeError`` too) naming the call and the fix; a failed open closes what it
opened; leaving the block stops a ``run()`` left going."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import eventually, make_config

from edgesync.agent import Agent, AgentLifecycle, _device_db
from edgesync.agent._state import StateStore
from edgesync.agent.capture._batcher import Batcher
from edgesync.errors import AgentLifecycleError


async def test_from_new_to_closed_with_the_misuses_refused(
        app: sqlite3.Connection, source_db: Path, tmp_path: Path, device_id: str) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    agent = Agent(make_config(device_id, source_db, tmp_path))
    assert agent.lifecycle is AgentLifecycle.NEW
    with pytest.raises(AgentLifecycleError, match=r"^Agent.flush\(\): the agent is new; "
                                                  r"use it inside `async with"):
        await agent.flush()
    with pytest.raises(RuntimeError, match=r"^Agent.run\(\): the agent is new"):
        await agent.run()

    async with agent:
        assert agent.lifecycle is AgentLifecycle.OPEN
        with pytest.raises(AgentLifecycleError, match="open already; enter an Agent once"):
            async with agent:
                pass
        await asyncio.wait_for(agent.wait_connected(), 10)
        app.execute("INSERT INTO t VALUES (1)")
        assert await agent.flush() == 1
        runner = asyncio.create_task(agent.run())
        await eventually(lambda: agent.lifecycle is AgentLifecycle.RUNNING)
        with pytest.raises(AgentLifecycleError, match=r"run\(\) is going"):
            await agent.run()
        app.execute("INSERT INTO t VALUES (2)")
        assert await agent.flush() in (0, 1)  # flush() works beside run() (in turn)
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        assert agent.lifecycle is AgentLifecycle.OPEN
        assert await agent.flush() == 0

    assert agent.lifecycle is AgentLifecycle.CLOSED
    with pytest.raises(AgentLifecycleError, match="closed; an Agent is opened once; make a "
                                                  r"new Agent\(config\)"):
        await agent.flush()
    with pytest.raises(AgentLifecycleError, match="closed"):
        async with agent:
            pass
    async with Agent(make_config(device_id, source_db, tmp_path)) as again:
        assert again.lifecycle is AgentLifecycle.OPEN  # the locks were released


async def test_leaving_the_block_stops_a_run_left_going(
        source_db: Path, tmp_path: Path, device_id: str) -> None:
    async with Agent(make_config(device_id, source_db, tmp_path)) as agent:
        runner = asyncio.create_task(agent.run())
        await eventually(lambda: agent.lifecycle is AgentLifecycle.RUNNING)
    assert agent.lifecycle is AgentLifecycle.CLOSED
    await asyncio.gather(runner, return_exceptions=True)
    assert runner.cancelled()


async def test_a_failed_open_closes_what_it_opened(
        app: sqlite3.Connection, source_db: Path, tmp_path: Path, device_id: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    closed: list[str] = []
    for cls in (StateStore, Batcher):
        def spy(self: Any, _close: Any = cls.close, _name: str = cls.__name__) -> None:
            closed.append(_name)
            _close(self)
        monkeypatch.setattr(cls, "close", spy)

    def broken(*args: object, **kwargs: object) -> object:
        raise OSError("discovery failed")

    monkeypatch.setattr(_device_db, "discover", broken)
    agent = Agent(make_config(device_id, source_db, tmp_path))
    with pytest.raises(OSError, match="discovery failed"):
        async with agent:
            pass
    assert agent.lifecycle is AgentLifecycle.CLOSED
    assert sorted(closed) == ["Batcher", "StateStore"]

    monkeypatch.undo()
    async with Agent(make_config(device_id, source_db, tmp_path)) as again:
        assert again.lifecycle is AgentLifecycle.OPEN  # the locks were released
