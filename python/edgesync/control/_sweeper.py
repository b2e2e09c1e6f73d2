"""Periodic backpressure sweep (one worker at a time, by advisory lock)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import NoReturn

import asyncpg

from edgesync.control._flow import sweep_backpressure
from edgesync.protocol import periodic_loop
from edgesync.store import Conn, unlock_session_lock

__all__ = ["BackpressureSweeper", "alone"]

_log = logging.getLogger(__name__)
_LOCK = 0x65_64_67_65_73_77  # "edgesw"


class BackpressureSweeper:
    def __init__(self, pool: asyncpg.Pool, *, interval: float = 2.0) -> None:
        self._pool = pool
        self._interval = interval

    async def run(self) -> NoReturn:
        await periodic_loop("backpressure sweep", self.sweep, interval=self._interval,
                            logger=_log)

    async def sweep(self) -> int:
        return await alone(self._pool, _LOCK, sweep_backpressure)


async def alone(pool: asyncpg.Pool, lock: int,
                job: Callable[[Conn], Awaitable[int]]) -> int:
    """``job`` on a connection holding the advisory ``lock`` (0 when another worker
    holds it: one worker at a time runs a periodic sweep)."""
    async with pool.acquire() as conn:
        if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", lock):
            return 0
        try:
            return await job(conn)
        finally:
            await unlock_session_lock(conn, lock)
