"""Replay intents (``edge_replay_intents``) and their channel: this module is their one
writer. An intent asks the replayer (``edgesync.ingest.Replayer``) to write a lineage's
staged batches of approved schemas; ``REPLAY_CHANNEL`` wakes it at once."""

from __future__ import annotations

import enum
import uuid

from edgesync.store import Conn

__all__ = ["REPLAY_CHANNEL", "ReplayStatus", "count_replayed", "finish_replay",
           "schedule_replay"]

REPLAY_CHANNEL = "edge_replay"


class ReplayStatus(enum.StrEnum):
    """An intent: ``pending`` until the replayer has drained its lineage, then ``done``
    (``failed`` is allowed by the column; nothing sets it: a failing chunk is retried)."""

    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"


# Spelled into the statements, not passed as parameters: the partial index of pending
# intents (``WHERE status = 'pending'``) serves only a query that names the value itself.
_PENDING = f"'{ReplayStatus.PENDING}'"


async def schedule_replay(conn: Conn, lineage_id: uuid.UUID, *,
                          review_id: uuid.UUID | None = None,
                          registry_review_id: uuid.UUID | None = None) -> None:
    """A pending intent for ``lineage_id`` (committed with the caller's transaction), and
    the replayer woken."""
    await conn.execute(
        "INSERT INTO edge_replay_intents (id, lineage_id, review_id, registry_review_id) "
        "VALUES ($1, $2, $3, $4)", uuid.uuid4(), lineage_id, review_id, registry_review_id)
    await conn.execute("SELECT pg_notify($1, $2)", REPLAY_CHANNEL, str(lineage_id))


async def count_replayed(conn: Conn, lineage_id: uuid.UUID, rows: int) -> None:
    await conn.execute(
        "UPDATE edge_replay_intents SET rows_replayed = rows_replayed + $2 "
        f"WHERE lineage_id = $1 AND status = {_PENDING}", lineage_id, rows)


async def finish_replay(conn: Conn, lineage_id: uuid.UUID) -> bool:
    """Mark the lineage's pending intents done; whether there was one."""
    done = await conn.fetchval(
        f"UPDATE edge_replay_intents SET status = '{ReplayStatus.DONE}', completed_at = now(), "
        "rows_replayed = rows_replayed + $2 WHERE lineage_id = $1 "
        f"AND status = {_PENDING} RETURNING id", lineage_id, 0)
    return done is not None
