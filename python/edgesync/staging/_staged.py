"""Staged rows: batches held (as zstd blobs of the original payload) until they can
be materialized. Keeping the payload whole means replay decodes and validates it
through exactly the same Rust path as a live batch."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import orjson

from edgesync import _core
from edgesync._core import RowBatch, TelemetryBatch
from edgesync.governance import StagingReason, add_staged, take_staged
from edgesync.protocol import Pipeline
from edgesync.store import Conn

__all__ = ["STAGING_REASONS", "StagedBatch", "StagedRow", "discard_staged", "label_schema_rejected",
           "list_staged_rows", "mark_materialization_failed", "requeue_failed", "stage_many",
           "unstage_many"]

# Why a batch waits in staging (edge_staged_rows.staging_reason).
STAGING_REASONS = tuple(StagingReason)


async def discard_staged(conn: Conn, lineage_id: uuid.UUID, *, reason: str | None = None,
                         schema_hash: str | None = None) -> tuple[int, int]:
    """Delete a lineage's staged batches — all, or those of one ``staging_reason`` and/or
    one ``schema_hash`` — and take them off its counters; returns ``(batches, rows)``.
    Their ledger rows stay (``outcome = 'staged'``): a redelivery is still a duplicate,
    so a discarded batch never comes back by itself."""
    rec = await conn.fetchrow(
        "WITH gone AS (DELETE FROM edge_staged_rows WHERE lineage_id = $1 "
        "  AND ($2::text IS NULL OR staging_reason = $2) "
        "  AND ($3::text IS NULL OR schema_hash = $3) RETURNING row_count, byte_count) "
        "SELECT count(*) AS n, coalesce(sum(row_count), 0) AS r, "
        "  coalesce(sum(byte_count), 0) AS b FROM gone", lineage_id, reason, schema_hash)
    assert rec is not None
    if rec["n"]:
        await take_staged(conn, lineage_id, int(rec["r"]), int(rec["b"]))
    return int(rec["n"]), int(rec["r"])


async def unstage_many(conn: Conn, lineage_id: uuid.UUID, staged_ids: list[int]) -> int:
    """Remove staged batches of one lineage (replayed); returns their rows."""
    if not staged_ids:
        return 0
    rec = await conn.fetchrow(
        "WITH gone AS (DELETE FROM edge_staged_rows WHERE id = ANY($2::bigint[]) "
        "  AND lineage_id = $1 RETURNING row_count, byte_count) "
        "SELECT coalesce(sum(row_count), 0) AS r, coalesce(sum(byte_count), 0) AS b "
        "FROM gone", lineage_id, staged_ids)
    assert rec is not None
    await take_staged(conn, lineage_id, int(rec["r"]), int(rec["b"]))
    return int(rec["r"])


async def mark_materialization_failed(conn: Conn, staged_id: int) -> None:
    """A staged batch the replayer could not write: kept, out of replay until a reset."""
    await conn.execute("UPDATE edge_staged_rows SET staging_reason = 'materialization_failed' "
                       "WHERE id = $1", staged_id)


async def label_schema_rejected(conn: Conn, lineage_id: uuid.UUID, schema_hash: str) -> int:
    """After ``governance.reject_review``, in its caller's transaction: the batches staged
    for that review under the rejected version stay staged, labelled ``schema_rejected``
    (discardable by schema version or reason). Returns the batches relabelled."""
    status = await conn.execute(
        "UPDATE edge_staged_rows SET staging_reason = $3 WHERE lineage_id = $1 "
        "AND schema_hash = $2 AND staging_reason = $4", lineage_id, schema_hash,
        StagingReason.SCHEMA_REJECTED, StagingReason.SCHEMA_REVIEW)
    return _count(status)


async def requeue_failed(conn: Conn, lineage_id: uuid.UUID) -> int:
    """After ``control.reset_materialization``, in its caller's transaction: the batches the
    replayer could not write become replayable again (``lineage_paused``, which the replay
    the reset scheduled picks up). Returns the batches requeued."""
    status = await conn.execute(
        "UPDATE edge_staged_rows SET staging_reason = $2 "
        "WHERE lineage_id = $1 AND staging_reason = $3", lineage_id,
        StagingReason.LINEAGE_PAUSED, StagingReason.MATERIALIZATION_FAILED)
    return _count(status)


def _count(status: str) -> int:
    """The row count of an ``UPDATE n`` command status."""
    return int(status.rsplit(" ", 1)[-1])


@dataclass(frozen=True, slots=True)
class StagedRow:
    """One row of a staged batch: which batch holds it and why, and the row itself."""

    staged_id: int  # edge_staged_rows.id
    staging_reason: StagingReason
    schema_hash: str
    # The row as its batch carries it, decoded from the blob: a row batch's change
    # (``commit_seq``, ``op``, ``pk``, ``row``) or a telemetry sample (its columns). Its
    # values are the device's free-form JSON, whatever the schema says: it stays JSON.
    doc: Mapping[str, Any]


async def list_staged_rows(conn: Conn, lineage_id: uuid.UUID, *,
                           offset: int = 0, limit: int = 100) -> list[StagedRow]:
    """Staged row operations, oldest first, one per row of each staged batch."""
    out: list[StagedRow] = []
    skipped = 0
    async for rec in _iter_staged(conn, lineage_id):
        doc = orjson.loads(_core.decompress_blob(rec["blob"]))
        rows = doc.get("rows", [])
        if skipped + len(rows) <= offset:
            skipped += len(rows)
            continue
        for row in rows[max(0, offset - skipped):]:
            out.append(StagedRow(rec["id"], StagingReason(rec["staging_reason"]),
                                 rec["schema_hash"], row))
            if len(out) >= limit:
                return out
        skipped += len(rows)
    return out


async def _iter_staged(conn: Conn, lineage_id: uuid.UUID
                       ) -> AsyncIterator[asyncpg.Record]:
    async with conn.transaction():
        async for rec in conn.cursor(
            "SELECT id, staging_reason, schema_hash, blob FROM edge_staged_rows "
            "WHERE lineage_id = $1 ORDER BY id", lineage_id):
            yield rec


@dataclass(frozen=True, slots=True)
class StagedBatch:
    """A batch to hold in staging: its ledger row, lineage and why it waits."""

    lineage_id: uuid.UUID
    device_id: uuid.UUID
    segment_id: int
    batch: RowBatch | TelemetryBatch
    payload: bytes
    reason: str


async def stage_many(conn: Conn, staged: list[StagedBatch]) -> list[uuid.UUID]:
    """Stage the batches of a group (two statements); returns the lineages whose backlog
    grew, for the caller's backpressure check."""
    if not staged:
        return []
    rows: list[tuple[object, ...]] = []
    for s in staged:
        b = s.batch
        if isinstance(b, TelemetryBatch):
            rows.append((s.lineage_id, s.device_id, s.segment_id, b.source_table, s.reason,
                         b.schema_hash, Pipeline.TELEMETRY, b.batch_seq,
                         datetime.fromisoformat(b.first_event_ts),
                         datetime.fromisoformat(b.last_event_ts), None, None, None,
                         b.row_count, len(s.payload), _core.compress_blob(s.payload)))
        else:
            rows.append((s.lineage_id, s.device_id, s.segment_id, b.source_table, s.reason,
                         b.schema_hash, Pipeline.ROWS, None, None, None, uuid.UUID(b.journal_epoch),
                         b.first_commit_seq, b.last_commit_seq, b.row_count, len(s.payload),
                         _core.compress_blob(s.payload)))
    await conn.execute(
        "INSERT INTO edge_staged_rows (lineage_id, device_id, segment_id, source_table, "
        "staging_reason, schema_hash, pipeline, batch_seq, first_event_ts, last_event_ts, "
        "journal_epoch, first_commit_seq, last_commit_seq, row_count, byte_count, blob) "
        "SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::bigint[], $4::text[], $5::text[], "
        "$6::text[], $7::text[], $8::bigint[], $9::timestamptz[], $10::timestamptz[], "
        "$11::uuid[], $12::bigint[], $13::bigint[], $14::int[], $15::int[], $16::bytea[])",
        *(list(c) for c in zip(*rows, strict=True)))
    await add_staged(conn, [s.lineage_id for s in staged], [s.batch.row_count for s in staged],
                     [len(s.payload) for s in staged])
    return list(dict.fromkeys(s.lineage_id for s in staged))
