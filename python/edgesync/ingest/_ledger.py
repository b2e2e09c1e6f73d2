"""The batch ledger (``edge_export_segments``): dedupe key and audit trail."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import orjson

from edgesync import _core
from edgesync._core import RowBatch
from edgesync.errors import BatchRejected
from edgesync.store import Conn

__all__ = ["claim_batch", "mark_seen_again", "record_rejection", "redelivered",
           "settle_batch"]


async def claim_batch(conn: Conn, device_id: uuid.UUID, topic_kind: str,
                      batch: RowBatch) -> int | None:
    """Insert the ledger row; ``None`` when this (device, batch_id) was already accepted.
    Runs in the transaction that writes the batch's rows, so both commit or neither."""
    seg_id: int | None = await conn.fetchval(
        "INSERT INTO edge_export_segments (device_id, batch_id, topic_kind, source_table, "
        "outcome, schema_hash, journal_epoch, first_commit_seq, last_commit_seq, row_count, "
        "payload_bytes) VALUES ($1, $2, $3, $4, 'staged', $5, $6, $7, $8, $9, $10) "
        "ON CONFLICT (device_id, batch_id) WHERE outcome <> 'rejected' DO NOTHING RETURNING id",
        device_id, uuid.UUID(batch.batch_id), topic_kind, batch.source_table, batch.schema_hash,
        uuid.UUID(batch.journal_epoch), batch.first_commit_seq, batch.last_commit_seq,
        batch.row_count, batch.payload_size)
    if seg_id is None:
        # Seen again: a new seen_seq makes the progress reporter confirm it once more, so
        # a device that missed the first confirmation stops re-sending.
        await conn.execute(
            "UPDATE edge_export_segments SET seen_seq = nextval('edge_export_segments_seen_seq') "
            "WHERE device_id = $1 AND batch_id = $2 AND outcome <> 'rejected'",
            device_id, uuid.UUID(batch.batch_id))
    return seg_id


async def mark_seen_again(conn: Conn, device_id: uuid.UUID, batch_id: str) -> bool:
    """True when (device, batch_id) was accepted already; then it takes a new seen_seq
    (like ``claim_batch`` for a duplicate) so its confirmation goes out again. One
    indexed UPDATE, no transaction: the cheap answer to a redelivery."""
    seg_id = await conn.fetchval(
        "UPDATE edge_export_segments SET seen_seq = nextval('edge_export_segments_seen_seq') "
        "WHERE device_id = $1 AND batch_id = $2 AND outcome <> 'rejected' RETURNING id",
        device_id, uuid.UUID(batch_id))
    return seg_id is not None


async def redelivered(conn: Conn, device_id: uuid.UUID, payload: bytes) -> str | None:
    """The batch_id of a payload whose batch was accepted already (then marked seen
    again), read with ``peek_batch_id`` before any decoding; else None."""
    batch_id = _core.peek_batch_id(payload)
    if batch_id is None:
        return None
    return batch_id if await mark_seen_again(conn, device_id, batch_id) else None


async def settle_batch(conn: Conn, seg_id: int, lineage_id: uuid.UUID,
                       outcome: str) -> None:
    await conn.execute(
        "UPDATE edge_export_segments SET outcome = $2, lineage_id = $3 WHERE id = $1",
        seg_id, outcome, lineage_id)


def _salvage(payload: bytes) -> dict[str, Any]:
    """Best-effort identifiers from a rejected payload, for the record only."""
    try:
        doc = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(doc, dict):
        return {}
    out: dict[str, Any] = {}
    with contextlib.suppress(ValueError):
        out["batch_id"] = uuid.UUID(str(doc.get("batch_id")))
    table = doc.get("source_table")
    if isinstance(table, str) and table:
        out["source_table"] = table[:255]
    return out


async def record_rejection(conn: Conn, device_id: uuid.UUID, topic_kind: str,
                           payload: bytes, rej: BatchRejected) -> uuid.UUID | None:
    """Keep the rejection visible; returns the lineage it belongs to, when one exists."""
    meta = _salvage(payload)
    lineage_id = None
    if "source_table" in meta:
        lineage_id = await conn.fetchval(
            "UPDATE edge_table_lineages SET rejected_batches = rejected_batches + 1 "
            "WHERE device_id = $1 AND source_table = $2 RETURNING id",
            device_id, meta["source_table"])
    await conn.execute(
        "INSERT INTO edge_export_segments (device_id, lineage_id, batch_id, topic_kind, "
        "source_table, outcome, rejection_code, rejection_field, rejection_detail, payload_bytes) "
        "VALUES ($1, $2, $3, $4, $5, 'rejected', $6, $7, $8, $9)",
        device_id, lineage_id, meta.get("batch_id"), topic_kind, meta.get("source_table"),
        rej.code, rej.field, rej.detail[:2000], len(payload))
    return lineage_id if isinstance(lineage_id, uuid.UUID) else None
