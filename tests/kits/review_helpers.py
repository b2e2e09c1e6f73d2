"""Schema reviews decided in-process by an operator ("op"), for the tests in tests/ and
its directories (pytest puts tests/ on ``sys.path`` for tests/conftest.py, so they
import it by plain name)."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from edgesync import governance


async def queued_review(pool: asyncpg.Pool, lineage_id: uuid.UUID) -> governance.Review:
    """The lineage's one queued review."""
    async with pool.acquire() as conn:
        (review,) = [r for r in await governance.list_reviews(conn, status="queued")
                     if r.lineage_id == lineage_id]
    return review


async def claim_and_approve(pool: asyncpg.Pool, review: governance.Review,
                            actions: list[dict[str, Any]] | None, *,
                            sync_authority: str | None = None) -> governance.Review:
    """Claim ``review`` and approve it (``actions`` None: mirror every column)."""
    async with pool.acquire() as conn:
        claimed = await governance.claim_review(conn, review.id, actor="op",
                                                action_version=review.action_version)
        return await governance.approve_review(conn, review.id, actor="op",
                                               action_version=claimed.action_version,
                                               column_actions=actions,
                                               sync_authority=sync_authority)


async def approve(pool: asyncpg.Pool, lineage_id: uuid.UUID,
                  actions: list[dict[str, Any]] | None = None, *,
                  sync_authority: str | None = None) -> governance.Review:
    """Claim the lineage's queued review and approve it."""
    return await claim_and_approve(pool, await queued_review(pool, lineage_id), actions,
                                   sync_authority=sync_authority)


async def approve_registry(pool: asyncpg.Pool, project_id: uuid.UUID) -> int:
    """Claim and approve every registry review of the project (every column mirrored);
    returns how many."""
    async with pool.acquire() as conn:
        queued = await governance.list_registry_reviews(conn, project_id)
        for review in queued:
            claimed = await governance.claim_registry_review(
                conn, review.id, actor="op", action_version=review.action_version)
            await governance.approve_registry_review(
                conn, review.id, actor="op", action_version=claimed.action_version,
                column_actions=None)
    return len(queued)


# The three breaking changes of issue 27 as an application makes them, on a state table
# ``machines``: ``temp_c`` retyped REAL → TEXT by rebuilding the table, then ``note``
# dropped and ``state`` renamed to ``status`` (another rebuild: SQLite refuses DROP COLUMN
# on a column the agent's capture triggers name).
MACHINES_V1 = ("CREATE TABLE machines (id INTEGER PRIMARY KEY, state TEXT, temp_c REAL, "
               "note TEXT)")
MACHINES_V1_ROWS = ("INSERT INTO machines VALUES (?, ?, ?, ?)",
                    [(i, "run" if i % 2 else "idle", 20.5 + i, f"n{i}") for i in range(1, 6)])
# The first approval of ``machines``: ``state`` mirrored as ``machine_state``, ``note``
# ignored (the decisions the next reviews carry forward).
MACHINES_V1_DECISION = [
    {"source_column_name": "id", "action": "mirror"},
    {"source_column_name": "state", "action": "mirror", "mirror_column_name": "machine_state"},
    {"source_column_name": "temp_c", "action": "mirror"},
    {"source_column_name": "note", "action": "ignore"}]
MACHINES_RETYPED = (
    "CREATE TABLE machines_new (id INTEGER PRIMARY KEY, state TEXT, temp_c TEXT, note TEXT)",
    "INSERT INTO machines_new SELECT id, state, CAST(temp_c AS TEXT) || ' C', note "
    "FROM machines",
    "DROP TABLE machines",
    "ALTER TABLE machines_new RENAME TO machines",
    "UPDATE machines SET state = 'hot', temp_c = 'high' WHERE id = 1")
MACHINES_DROPPED_RENAMED = (
    "CREATE TABLE machines_new (id INTEGER PRIMARY KEY, status TEXT, temp_c TEXT)",
    "INSERT INTO machines_new SELECT id, state, temp_c FROM machines",
    "DROP TABLE machines",
    "ALTER TABLE machines_new RENAME TO machines",
    "UPDATE machines SET status = 'stopped' WHERE id = 2")
