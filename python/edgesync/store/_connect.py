"""A migrated pool for one-shot commands (CLI, demo): the given URL or the embedded server."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg

from edgesync.store._embedded import embedded_postgres
from edgesync.store._migrations import migrate
from edgesync.store._pool import create_pool

__all__ = ["open_database"]


@contextlib.asynccontextmanager
async def open_database(database_url: str | None, data_dir: Path) -> AsyncIterator[asyncpg.Pool]:
    async with contextlib.AsyncExitStack() as stack:
        if database_url:
            url = database_url
        else:
            url = await stack.enter_async_context(embedded_postgres(data_dir))
        pool = await create_pool(url, max_size=4)
        stack.push_async_callback(pool.close)
        async with pool.acquire() as conn:
            await migrate(conn)
        yield pool
