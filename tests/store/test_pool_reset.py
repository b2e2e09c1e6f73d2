"""The pool gives a connection back with no server-side reset (store._pool), so what
takes session state gives it back itself: LISTEN, session advisory locks."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from edgesync.control._sweeper import alone
from edgesync.protocol import listen_loop
from edgesync.store import create_pool


@pytest.fixture
async def one(database_url: str) -> Any:
    """A pool of one connection: every acquire gets the same one back."""
    pool = await create_pool(database_url, min_size=1, max_size=1)
    try:
        yield pool
    finally:
        await pool.close()


async def test_a_released_connection_costs_no_round_trip(one: asyncpg.Pool) -> None:
    seen: list[str] = []
    async with one.acquire() as conn:
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        conn.add_query_logger(lambda record: seen.append(record.query))
        async with conn.transaction():
            await conn.execute("SELECT 1")
    async with one.acquire() as conn:
        assert await conn.fetchval("SELECT pg_backend_pid()") == pid
    assert seen == ["BEGIN;", "SELECT 1", "COMMIT;", "SELECT pg_backend_pid()"]


async def test_a_transaction_left_open_is_rolled_back(one: asyncpg.Pool) -> None:
    async with one.acquire() as conn:
        await conn.execute("BEGIN")
        await conn.execute("CREATE TEMP TABLE left_open (x int)")
    async with one.acquire() as conn:
        assert await conn.fetchval("SELECT to_regclass('pg_temp.left_open')") is None


async def test_listen_loop_unlistens_before_its_connection_goes_back(
        one: asyncpg.Pool) -> None:
    rounds = asyncio.Event()

    async def round_() -> None:
        rounds.set()

    task = asyncio.create_task(listen_loop("test listener", one, "edgesync_pool_reset",
                                           round_, poll=60))
    async with asyncio.timeout(10):
        await rounds.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with one.acquire() as conn:
        assert await conn.fetch("SELECT * FROM pg_listening_channels()") == []


async def test_alone_gives_its_advisory_lock_back(one: asyncpg.Pool) -> None:
    async def held(conn: Any) -> int:
        return int(await conn.fetchval(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
            "AND pid = pg_backend_pid()"))

    assert await alone(one, 4242_0001, held) == 1  # held while the job runs

    async def failing(conn: Any) -> int:
        raise RuntimeError("the job failed")

    with pytest.raises(RuntimeError):
        await alone(one, 4242_0001, failing)
    async with one.acquire() as conn:
        assert await held(conn) == 0
