"""The database pool of the running app, and a per-request connection."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

import asyncpg
from fastapi import Depends, Request

from edgesync.store import Conn

__all__ = ["Db", "db", "pool_of"]


def pool_of(request: Request) -> asyncpg.Pool:
    pool: asyncpg.Pool | None = request.app.state.pool
    assert pool is not None, "the API app has no database pool (lifespan not started?)"
    return pool


async def db(request: Request) -> AsyncIterator[Conn]:
    async with pool_of(request).acquire() as conn:
        yield conn


Db = Annotated[Conn, Depends(db)]
