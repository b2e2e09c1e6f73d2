"""Replay: drain staged batches of approved schemas into their targets.

An approval writes a replay intent and NOTIFYs; the replayer also polls, so an
intent written while no worker ran (approval from the CLI, a crash) is picked up
at the next start. Each staged batch is materialized and removed in one
transaction, down the one write path of live ingest (``_write``); newer-wins upserts
make the order against live batches irrelevant. Its batches have their ledger rows
already (claimed when they were staged): replay shares everything after the claim.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import NoReturn

import asyncpg

from edgesync import _core
from edgesync._core import RowBatch, TelemetryBatch
from edgesync.control import record_materialization_failure
from edgesync.errors import BatchRejected
from edgesync.governance import (
    REPLAY_CHANNEL,
    EventType,
    Lineage,
    LineageStatus,
    PauseReason,
    ReplayStatus,
    count_materialized,
    count_replayed,
    emit,
    finish_replay,
    get_lineage_for_update,
    load_state_target,
)
from edgesync.ingest._write import Claimed, Written, isolate, write_claimed
from edgesync.materialize import StateTarget
from edgesync.protocol import Backoff, Pipeline, listen_loop
from edgesync.staging import mark_materialization_failed, unstage_many
from edgesync.store import Conn, collided

__all__ = ["Replayer"]

_log = logging.getLogger(__name__)
# Staged batches per transaction (written with one COPY per target).
_CHUNK = 20
# Attempts at a chunk whose transaction collides with another before the error is
# raised (the replay loop logs it and tries again at its next poll).
_COLLISION_ATTEMPTS = 8


class Replayer:
    def __init__(self, pool: asyncpg.Pool, *, poll_interval: float = 2.0) -> None:
        self._pool = pool
        self._poll = poll_interval
        self.wake = asyncio.Event()
        """Set it to drain now (a NOTIFY on the replay channel does too)."""

    async def run(self) -> NoReturn:
        await listen_loop("replay", self._pool, REPLAY_CHANNEL, self.drain_pending,
                          poll=self._poll, wake=self.wake, logger=_log)

    async def drain_pending(self, *, project_id: uuid.UUID | None = None) -> int:
        """Replay every lineage with a pending intent (of one project, when given);
        returns the rows replayed."""
        async with self._pool.acquire() as conn:
            # Telemetry lineages first (telemetry-first replay when both kinds wait).
            lineages = await conn.fetch(
                "SELECT i.lineage_id FROM edge_replay_intents i "
                "JOIN edge_table_lineages l ON l.id = i.lineage_id "
                f"WHERE i.status = '{ReplayStatus.PENDING}' "
                "AND ($1::uuid IS NULL OR l.project_id = $1) "
                "GROUP BY i.lineage_id, l.pipeline "
                f"ORDER BY l.pipeline <> '{Pipeline.TELEMETRY}', "
                "min(i.created_at)", project_id)
        total = 0
        for rec in lineages:
            total += await self.replay_lineage(rec["lineage_id"])
        return total

    async def replay_lineage(self, lineage_id: uuid.UUID) -> int:
        replayed = 0
        backoff = Backoff(base=0.1, cap=2.0)
        collisions = 0
        while True:
            try:
                async with self._pool.acquire() as conn, conn.transaction():
                    rows = await self._replay_next(conn, lineage_id)
            except Exception as exc:
                # Live ingest, another replay or another worker collided with this chunk
                # (a partition created meanwhile, a deadlock): the chunk again, in a new
                # transaction that sees their commit. Never marked failed for it.
                if not collided(exc) or collisions >= _COLLISION_ATTEMPTS:
                    raise
                collisions += 1
                wait = backoff.next_delay()
                _log.warning("replay of lineage %s collided (%s: %s); again in %.1fs",
                             lineage_id, type(exc).__name__, exc, wait)
                await asyncio.sleep(wait)
                continue
            if rows is None:
                return replayed
            replayed += rows

    async def _replay_next(self, conn: Conn, lineage_id: uuid.UUID) -> int | None:
        """Replay the lineage's next chunk; returns its rows, or None when nothing (more)
        can be replayed now."""
        lineage = await get_lineage_for_update(conn, lineage_id)
        if lineage is None:
            return None
        if lineage.status == LineageStatus.PAUSED and lineage.pause_reason in (
                PauseReason.CIRCUIT_BREAKER, PauseReason.DEFERRED_COLUMNS):
            return None  # resumes through reset-materialization / a new review
        # Each staged batch is written with the bindings of its own approved version, or
        # of the approved version an operator found its rejected one compatible with
        # (``replay_as_schema_hash``, governance.replay_rejected).
        staged = await conn.fetch(
            "WITH bind AS (SELECT schema_hash, CASE WHEN status = 'approved' "
            "  THEN schema_hash WHEN status = 'rejected' THEN replay_as_schema_hash "
            "  END AS bind_hash FROM edge_schema_versions WHERE lineage_id = $1) "
            "SELECT s.id, s.segment_id, b.bind_hash, s.pipeline, s.blob, s.row_count, "
            "s.byte_count FROM edge_staged_rows s JOIN bind b USING (schema_hash) "
            "WHERE s.lineage_id = $1 AND s.staging_reason <> 'materialization_failed' "
            "AND b.bind_hash IN (SELECT schema_hash FROM edge_schema_versions "
            "  WHERE lineage_id = $1 AND status = 'approved') "
            # A schema approved with deferred columns is not decided yet: its rows stay
            # staged (replaying them would lose the deferred values for good) until an
            # approval binds every column.
            "AND b.bind_hash NOT IN (SELECT schema_hash FROM edge_column_bindings "
            "  WHERE lineage_id = $1 AND action = 'defer') "
            "ORDER BY s.pipeline <> 'telemetry', s.id LIMIT $2",
            lineage_id, _CHUNK)
        if not staged:
            if await finish_replay(conn, lineage_id):
                await emit(conn, lineage.project_id, EventType.REPLAY_COMPLETED,
                           lineage.id, {"lineage_id": str(lineage.id)})
            return None
        return await self._replay_chunk(conn, lineage, staged)

    async def _replay_chunk(self, conn: Conn, lineage: Lineage,
                            staged: list[asyncpg.Record]) -> int:
        """Write a chunk of staged batches down the same write path as live ingest
        (``write_claimed``: one COPY per target, rows set apart quarantined, conflicts
        sent back, failures counted), each part in a savepoint; a batch PostgreSQL
        refuses is split out (``isolate``) and, as live, has its rows written apart or is
        not written (marked ``materialization_failed``). A collision gives the chunk
        back to ``replay_lineage``. The others replay."""
        targets: dict[str, StateTarget] = {}
        batches: list[tuple[asyncpg.Record, Claimed]] = []
        failed: list[asyncpg.Record] = []
        for rec in staged:
            if rec["bind_hash"] not in targets:
                target = await load_state_target(conn, lineage, rec["bind_hash"])
                assert target is not None
                targets[rec["bind_hash"]] = target
            payload = _core.decompress_blob(rec["blob"])
            try:
                batch: RowBatch | TelemetryBatch = (
                    _core.decode_telemetry_batch(payload) if rec["pipeline"] == Pipeline.TELEMETRY
                    # Accepted once already; chunks of uploads may be large.
                    else _core.decode_row_batch(payload, 1 << 30))
            except BatchRejected as exc:
                # Not a write: counted here, as the write path counts its failures.
                _log.warning("replay of staged batch %s failed: %s", rec["id"], exc)
                await record_materialization_failure(conn, lineage.id, str(exc))
                failed.append(rec)
                continue
            batches.append((rec, Claimed(lineage.device_id, str(lineage.device_id), lineage,
                                         rec["segment_id"], batch,
                                         targets[rec["bind_hash"]])))
        results: dict[Claimed, Written] = {}

        async def attempt(part: list[Claimed]) -> None:
            async with conn.transaction():  # a savepoint: a failed part leaves no trace
                done = await write_claimed(conn, part, replay=True)
            results.update(zip(part, done, strict=True))

        async def retry(one: Claimed, exc: Exception) -> bool:
            if (collided(exc) or one.write_error is not None
                    or not isinstance(exc, asyncpg.PostgresError)):
                # Not the batch's: a collision replays the chunk again
                # (``replay_lineage``); anything else ends this replay (logged, the next
                # poll tries again).
                raise exc
            one.write_error = str(exc)
            return True

        async def unstorable(one: Claimed, exc: Exception) -> None:
            raise exc

        await isolate([c for _, c in batches], attempt, retry=retry, unstorable=unstorable)
        done = []
        quarantined = 0
        for rec, c in batches:
            written = results[c]
            if written.error is not None:
                failed.append(rec)
            else:
                quarantined += written.quarantined
                done.append(rec)
        for rec in failed:
            await mark_materialization_failed(conn, rec["id"])
        # Rows written: the staged rows less those quarantined.
        rows = await unstage_many(conn, lineage.id, [r["id"] for r in done]) - quarantined
        await count_materialized(conn, lineage.id, rows)
        await count_replayed(conn, lineage.id, rows)
        return rows
