"""One LISTEN connection shared by every event stream of the app.

It is taken from the pool when the first stream starts and given back when the last
one ends; each notification on ``edge_events`` wakes every stream, which then reads
``edge_events`` itself (so a missed notification only delays a stream until its next
poll, never loses an event).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg

from edgesync.governance import EVENT_CHANNEL

__all__ = ["EventHub"]


class EventHub:
    def __init__(self, pool: Callable[[], asyncpg.Pool]) -> None:
        self._pool = pool
        self._followers: set[asyncio.Event] = set()
        self._conn: Any = None
        self._lock = asyncio.Lock()

    def _notify(self, *_: object) -> None:
        for wake in self._followers:
            wake.set()

    @contextlib.asynccontextmanager
    async def follow(self) -> AsyncIterator[asyncio.Event]:
        """An event set whenever something may have been added to ``edge_events``."""
        wake = asyncio.Event()
        async with self._lock:
            if self._conn is None:
                conn = await self._pool().acquire()
                try:
                    await conn.add_listener(EVENT_CHANNEL, self._notify)
                except BaseException:
                    await self._pool().release(conn)
                    raise
                self._conn = conn
            self._followers.add(wake)
        try:
            yield wake
        finally:
            self._followers.discard(wake)
            await asyncio.shield(self._release_if_idle())

    async def _release_if_idle(self) -> None:
        async with self._lock:
            if self._followers or self._conn is None:
                return
            conn, self._conn = self._conn, None
            try:
                await conn.remove_listener(EVENT_CHANNEL, self._notify)
            finally:
                await self._pool().release(conn)
