"""INFO lines for what happened to lineages, reviews and replays, from the events table.

Governance, flow control and replay already record every decision as an
``edge_events`` row in the decision's own transaction; this loop LISTENs on the event
channel and logs each committed event as one line (a decision rolled back is never
logged), plus a line per lineage created (lineages emit no event of their own) and
per replay scheduled. With several workers each logs every event: read one worker's
lines, or keep ``logger == "edgesync.events"`` from one of them.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, NoReturn

import asyncpg

from edgesync.governance import EVENT_CHANNEL
from edgesync.protocol import listen_loop

__all__ = ["EventLog"]

_log = logging.getLogger("edgesync.events")
_PAGE = 500
_EVENTS = """
SELECT e.id, e.event_type, e.subject_id, e.body, d.name AS device, l.source_table
FROM edge_events e
LEFT JOIN edge_table_lineages l
  ON l.id = CASE WHEN e.body ? 'lineage_id' THEN (e.body->>'lineage_id')::uuid END
LEFT JOIN edge_devices d ON d.id = l.device_id
WHERE e.id > $1 ORDER BY e.id LIMIT $2
"""
_LINEAGES = """
SELECT l.id, l.created_at, l.pipeline, l.source_table, d.name AS device
FROM edge_table_lineages l JOIN edge_devices d ON d.id = l.device_id
WHERE l.created_at > $1 ORDER BY l.created_at LIMIT $2
"""
_INTENTS = """
SELECT i.created_at, i.lineage_id, l.source_table, l.staged_rows, d.name AS device
FROM edge_replay_intents i JOIN edge_table_lineages l ON l.id = i.lineage_id
JOIN edge_devices d ON d.id = l.device_id
WHERE i.created_at > $1 ORDER BY i.created_at LIMIT $2
"""
_WHAT = {
    "integration.edge_schema_review.queued.v1": "schema review opened",
    "integration.edge_schema_review.approved.v1": "schema review approved",
    "integration.edge_schema_review.rejected.v1": "schema review rejected",
    "integration.edge_registry_review.queued.v1": "registry review opened",
    "integration.edge_table_lineage.ingestion_paused.v1": "lineage paused",
    "integration.edge_table_lineage.ingestion_resumed.v1": "lineage resumed",
    "integration.edge_table_lineage.consolidated.v1": "lineage consolidated",
    "edgesync.table_lineage.deleted.v1": "lineage deleted",
    "edgesync.replay.completed.v1": "replay done",
    "edgesync.capture_gap.reported.v1": "capture gap reported",
    "integration.edge_export_segment.materialization_failed.v1": "materialization failed",
}


class EventLog:
    def __init__(self, pool: asyncpg.Pool, *, poll: float = 10.0) -> None:
        self._pool = pool
        self._poll = poll
        self._event_id: int | None = None  # None: not started (nothing before start)
        self._lineages_at: datetime | None = None
        self._intents_at: datetime | None = None

    async def run(self) -> NoReturn:
        await listen_loop("event log", self._pool, EVENT_CHANNEL, self.round, poll=self._poll,
                          logger=logging.getLogger(__name__))

    async def round(self) -> None:
        async with self._pool.acquire() as conn:
            if self._event_id is None:  # what happened before this process is history
                self._event_id = int(await conn.fetchval(
                    "SELECT coalesce(max(id), 0) FROM edge_events"))
                self._lineages_at = self._intents_at = await conn.fetchval("SELECT now()")
                return
            # Lineages first: their creation comes before the events about them.
            for rec in await conn.fetch(_LINEAGES, self._lineages_at, _PAGE):
                self._lineages_at = rec["created_at"]
                _log.info("lineage created: %s %r of %s (%s)", rec["pipeline"],
                          rec["source_table"], rec["device"], rec["id"])
            for rec in await conn.fetch(_EVENTS, self._event_id, _PAGE):
                self._event_id = int(rec["id"])
                _log.info("%s", _line(rec))
            for rec in await conn.fetch(_INTENTS, self._intents_at, _PAGE):
                self._intents_at = rec["created_at"]
                _log.info("replay scheduled: %r of %s, %d staged row(s) (lineage %s)",
                          rec["source_table"], rec["device"], rec["staged_rows"],
                          rec["lineage_id"])


def _line(rec: asyncpg.Record) -> str:
    body: dict[str, Any] = dict(rec["body"] or {})
    what = _WHAT.get(rec["event_type"], rec["event_type"])
    where = (f" {rec['source_table']!r} of {rec['device']}"
             if rec["device"] is not None else "")
    details = "; ".join(f"{k}={v}" for k, v in body.items() if v is not None)
    return f"{what}:{where} ({details})" if details else f"{what}:{where}"
