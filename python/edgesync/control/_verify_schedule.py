"""Periodic verification by policy (docs/recovery.md): every approved, active state
lineage of a project whose policy sets ``verify_interval_seconds`` gets a verification
when its newest one is older than that (and not still open: a device that never
answers gets one more after a day, not one per sweep). One worker at a time (an
advisory lock); at most ``BATCH`` requests per sweep, oldest-verified first."""

from __future__ import annotations

import logging
from typing import NoReturn

import asyncpg

from edgesync.control._sweeper import alone
from edgesync.control._verify import request_verify
from edgesync.protocol import periodic_loop
from edgesync.store import Conn

__all__ = ["POLICY_ACTOR", "VerificationScheduler"]

_log = logging.getLogger(__name__)
_LOCK = 0x65_64_67_76_65_72  # "edgver"
BATCH = 100
POLICY_ACTOR = "policy:verify_interval_seconds"

_DUE = """
SELECT l.project_id, l.id FROM edge_table_lineages l
JOIN edge_projects p ON p.id = l.project_id
LEFT JOIN LATERAL (SELECT v.created_at, v.status FROM edge_verifications v
                   WHERE v.lineage_id = l.id ORDER BY v.created_at DESC LIMIT 1) last ON true
WHERE (p.policy->>'verify_interval_seconds') ~ '^[0-9]+$'
  AND (p.policy->>'verify_interval_seconds')::bigint > 0
  AND l.pipeline = 'rows' AND l.status = 'active' AND l.approved_schema_hash IS NOT NULL
  AND l.target_table IS NOT NULL
  AND (last.created_at IS NULL OR (last.created_at
       < now() - make_interval(secs => (p.policy->>'verify_interval_seconds')::bigint)
       AND (last.status <> 'requested' OR last.created_at < now() - interval '1 day')))
ORDER BY last.created_at NULLS FIRST LIMIT $1
"""


class VerificationScheduler:
    def __init__(self, pool: asyncpg.Pool, *, interval: float = 30.0) -> None:
        self._pool = pool
        self._interval = interval

    async def run(self) -> NoReturn:
        await periodic_loop("verification schedule", self.sweep, interval=self._interval,
                            logger=_log)

    async def sweep(self) -> int:
        """Request the verifications due; returns how many."""
        return await alone(self._pool, _LOCK, _request_due)


async def _request_due(conn: Conn) -> int:
    due = await conn.fetch(_DUE, BATCH)
    for r in due:
        async with conn.transaction():
            await request_verify(conn, r["project_id"], r["id"], actor=POLICY_ACTOR)
    return len(due)
