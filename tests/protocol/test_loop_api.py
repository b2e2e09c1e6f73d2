"""The HTTP API of ``edgesync serve`` does not stay down when uvicorn stops on its own:
it is started again on the same address, and a cancel still stops it for good. Its
event streams' shared LISTEN connection is replaced when it dies."""

from __future__ import annotations

import asyncio
import logging

import asyncpg
import httpx
import pytest
from kits.e2e_kit import eventually

from edgesync.api import ApiServer, bind_socket, create_app
from edgesync.api._event_hub import EventHub
from edgesync.governance import EVENT_CHANNEL

LIMIT = 30  # hang guard, not a timing assertion


async def answers(url: str) -> bool:
    try:
        async with httpx.AsyncClient() as client:
            return (await client.get(f"{url}/openapi.json")).status_code == 200
    except httpx.HTTPError:
        return False


async def test_an_api_that_stopped_on_its_own_serves_again(
        pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture) -> None:
    api = ApiServer(create_app(pool), bind_socket("127.0.0.1", 0))
    task = asyncio.create_task(api.run())
    try:
        await eventually(lambda: answers(api.url), LIMIT, "the API answers")
        first = api._server
        with caplog.at_level(logging.INFO, logger="edgesync.api._serve"):
            first.should_exit = True  # uvicorn's own way out of its main loop
            await eventually(lambda: asyncio.sleep(0, api._server is not first), LIMIT,
                             "a new uvicorn")
            await eventually(lambda: answers(api.url), LIMIT, "the API answers again")
        assert not task.done()
        assert f"HTTP API on {api.url}: session ended; reconnecting" in caplog.text
    finally:
        task.cancel()
        await asyncio.wait({task}, timeout=LIMIT)
    assert task.cancelled()
    assert not await answers(api.url)


async def listening_pids(pool: asyncpg.Pool) -> list[int]:
    return [r["pid"] for r in await pool.fetch(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND query ILIKE 'LISTEN%' AND query LIKE $1", f"%{EVENT_CHANNEL}%")]


async def test_event_streams_are_woken_again_after_their_listen_connection_died(
        pool: asyncpg.Pool) -> None:
    hub = EventHub(lambda: pool)
    async with hub.follow() as wake:
        (pid,) = await eventually(lambda: listening_pids(pool), LIMIT, "a LISTEN connection")
        assert await pool.fetchval("SELECT pg_terminate_backend($1)", pid)

        async def replaced() -> bool:
            # The terminated backend may still be listed for a moment.
            return [p for p in await listening_pids(pool) if p != pid] != []

        await eventually(replaced, LIMIT, "a new LISTEN connection")
        wake.clear()
        await pool.execute(f"NOTIFY {EVENT_CHANNEL}")
        async with asyncio.timeout(LIMIT):
            await wake.wait()
    # The last stream gone, the connection went back to the pool, no longer listening.
    assert await listening_pids(pool) == []
