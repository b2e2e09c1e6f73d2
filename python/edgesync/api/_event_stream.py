"""Server-Sent Events of one project's governance events (``edge_events``).

Each event is sent as ``id: <edge_events.id>``, ``event: <event_type>`` and one
``data:`` line of JSON. A client resumes with ``Last-Event-ID`` (or ``?after=``).
Event ids come from a sequence, so a transaction can commit an id lower than one
already sent; the stream therefore re-reads a window of recent ids and skips the
ones it sent, so late commits within the window are still delivered.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import orjson

from edgesync.api._event_hub import EventHub

__all__ = ["KEEPALIVE_SECONDS", "event_stream", "latest_event_id"]

KEEPALIVE_SECONDS = 15.0
_WINDOW = 1000
_BATCH = 200


class _Cursor:
    """What has been sent: everything ≤ ``floor`` plus the ids in ``seen``."""

    def __init__(self, after: int) -> None:
        self.start = after
        self.floor = after
        self.top = after
        self.seen: set[int] = set()

    def mark(self, event_id: int) -> None:
        self.seen.add(event_id)
        self.top = max(self.top, event_id)
        floor = max(self.start, self.top - _WINDOW)
        if floor > self.floor:
            self.floor = floor
            self.seen = {i for i in self.seen if i > floor}


async def latest_event_id(pool: asyncpg.Pool, project_id: uuid.UUID) -> int:
    async with pool.acquire() as conn:
        return int(await conn.fetchval(
            "SELECT coalesce(max(id), 0) FROM edge_events WHERE project_id = $1", project_id))


def _frame(row: asyncpg.Record) -> bytes:
    doc = {"id": row["id"], "type": row["event_type"], "project_id": row["project_id"],
           "subject_id": row["subject_id"], "created_at": row["created_at"],
           "body": row["body"]}
    return (f"id: {row['id']}\nevent: {row['event_type']}\ndata: ".encode()
            + orjson.dumps(doc, default=str) + b"\n\n")


async def event_stream(pool: asyncpg.Pool, hub: EventHub, project_id: uuid.UUID,
                       after: int) -> AsyncIterator[bytes]:
    cursor = _Cursor(after)
    async with hub.follow() as wake:
        yield f"retry: 3000\nid: {after}\n: connected\n\n".encode()
        while True:
            wake.clear()
            async with pool.acquire() as conn:
                rows = await conn.fetch(
                    "SELECT id, project_id, event_type, subject_id, body, created_at "
                    "FROM edge_events WHERE project_id = $1 AND id > $2 "
                    "AND NOT (id = ANY($3::bigint[])) ORDER BY id LIMIT $4",
                    project_id, cursor.floor, list(cursor.seen), _BATCH)
            for row in rows:
                yield _frame(row)
                cursor.mark(row["id"])
            if len(rows) == _BATCH:
                continue
            try:
                async with asyncio.timeout(KEEPALIVE_SECONDS):
                    await wake.wait()
            except TimeoutError:
                yield b": keep-alive\n\n"
