"""The WARNING for messages of devices the registry does not know, rate-limited.

A device whose ``root_topic`` is wrong, or that nobody registered, sends for ever and
the server drops everything it sends; the operator must hear about it, but not once
per message. One line per (topic slug, device name) at most every ``interval``
seconds, naming the topic, how many messages were dropped since the last line, and
the likely fix (the slug is looked up once per line, to tell a wrong slug from an
unregistered device).
"""

from __future__ import annotations

import logging
import time

import asyncpg

__all__ = ["UnknownDevices"]

_log = logging.getLogger("edgesync.ingest")
# Keys remembered at most (a storm of random names must not grow memory).
_MAX_KEYS = 4096


class UnknownDevices:
    def __init__(self, pool: asyncpg.Pool, *, interval: float = 60.0) -> None:
        self._pool = pool
        self._interval = interval
        # (slug, device) → (monotonic time of the last line, messages since then)
        self._seen: dict[tuple[str, str], tuple[float, int]] = {}

    async def dropped(self, topic: str, slug: str, device: str) -> None:
        key = (slug, device)
        now = time.monotonic()
        last, count = self._seen.get(key, (None, 0))
        count += 1
        if last is not None and now - last < self._interval:
            self._seen[key] = (last, count)
            return
        if len(self._seen) >= _MAX_KEYS:
            self._seen.clear()
        self._seen[key] = (now, 0)
        _log.warning("unknown device: dropped %d message(s) on %s: %s", count, topic,
                     await self._fix(slug, device))

    async def _fix(self, slug: str, device: str) -> str:
        try:
            project = await self._pool.fetchval(
                "SELECT name FROM edge_projects WHERE topic_slug = $1", slug)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            # The database is away: both fixes.
            return (f"no device {device!r} under topic slug {slug!r}; register it "
                    f"(edgesync devices add {device} --project P) or fix the agent's "
                    "connection.root_topic")
        if project is None:
            return (f"no project has topic slug {slug!r}: set the agent's "
                    "connection.root_topic to <topic slug>/<device name> of its project "
                    "(edgesync devices list shows each device's root_topic)")
        return (f"project {project!r} (topic slug {slug!r}) has no device {device!r}: "
                f"register it (edgesync devices add {device} --project {project}) or fix "
                "the agent's connection.device_id")
