"""One LISTEN connection shared by every event stream of the app.

While at least one stream follows, a ``listen_loop`` task holds a connection from the
pool that LISTENs on ``edge_events``; each notification wakes every stream, which then
reads ``edge_events`` itself (so a missed notification only delays a stream until its
next poll, never loses an event). When that connection dies (a database restart) the
loop takes a new one and wakes every stream once more, so none waits for its poll to
see what was committed meanwhile. The task stops when the last stream ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable

import asyncpg

from edgesync.governance import EVENT_CHANNEL
from edgesync.protocol import listen_loop

__all__ = ["EventHub"]

_log = logging.getLogger(__name__)
# The listener's own poll: a wake-up of every stream at least this often even with no
# NOTIFY (the streams poll on their own too).
_POLL = 60.0


class EventHub:
    def __init__(self, pool: Callable[[], asyncpg.Pool]) -> None:
        self._pool = pool
        self._followers: set[asyncio.Event] = set()
        self._listener: asyncio.Task[None] | None = None

    async def _wake_all(self) -> None:
        for wake in self._followers:
            wake.set()

    @contextlib.asynccontextmanager
    async def follow(self) -> AsyncIterator[asyncio.Event]:
        """An event set whenever something may have been added to ``edge_events``."""
        wake = asyncio.Event()
        self._followers.add(wake)
        if self._listener is None:
            self._listener = asyncio.create_task(
                listen_loop("event stream listener", self._pool(), EVENT_CHANNEL,
                            self._wake_all, poll=_POLL, logger=_log),
                name="edgesync.api.events.listen")
        try:
            yield wake
        finally:
            self._followers.discard(wake)
            if not self._followers and self._listener is not None:
                listener, self._listener = self._listener, None
                listener.cancel()
                # Shielded: the stream's own cancellation must not leave the LISTEN
                # connection out of the pool.
                await asyncio.shield(asyncio.wait({listener}))
