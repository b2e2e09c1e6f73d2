"""The batch ledger (``edge_export_segments``): dedupe key and audit trail."""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg
import orjson

from edgesync.errors import BatchRejected
from edgesync.governance import count_rejected
from edgesync.protocol import RejectionCode
from edgesync.store import CommitTail, Conn, any_of, array_literal

__all__ = ["UNSTORABLE_TEXT", "UNSTORABLE_TEXT_ERRORS", "Claim", "SegmentKey", "claim_many",
           "ledger_text", "note_quarantined", "record_rejection", "redelivered_many",
           "settle_many", "taken_batch_seqs"]

# Rejection code of a message that passed validation yet holds a string PostgreSQL
# text cannot store (NUL, raised as one of UNSTORABLE_TEXT_ERRORS): the last resort
# that keeps it in the ledger. Names with NUL are refused earlier, by validation
# (invalid_source_table, invalid_schema_columns), so this code means a field no
# validator checks.
UNSTORABLE_TEXT = RejectionCode.UNSTORABLE_TEXT
UNSTORABLE_TEXT_ERRORS: tuple[type[Exception], ...] = (
    asyncpg.CharacterNotInRepertoireError, asyncpg.UntranslatableCharacterError)


def ledger_text(text: str, limit: int) -> str:
    """``text`` as PostgreSQL text can hold it: NUL written as the two characters
    ``\\0`` (and a lone surrogate as its ``\\udXXX`` escape), cut to ``limit``
    characters. For the record only: never used to look anything up."""
    if "\0" in text:
        text = text.replace("\0", "\\0")
    try:
        text.encode()
    except UnicodeEncodeError:
        text = text.encode(errors="backslashreplace").decode()
    return text[:limit]


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
        out["source_table"] = ledger_text(table, 255)
        # A name PostgreSQL could not store has no lineage to count against.
        out["known_table"] = out["source_table"] == table
    return out


async def record_rejection(conn: Conn, device_id: uuid.UUID, topic_kind: str,
                           payload: bytes, rej: BatchRejected) -> uuid.UUID | None:
    """Keep the rejection visible; returns the lineage it belongs to, when one exists."""
    meta = _salvage(payload)
    lineage_id = None
    if meta.get("known_table"):
        lineage_id = await count_rejected(conn, device_id, meta["source_table"])
    await conn.execute(
        "INSERT INTO edge_export_segments (device_id, lineage_id, batch_id, topic_kind, "
        "source_table, outcome, rejection_code, rejection_field, rejection_detail, payload_bytes) "
        "VALUES ($1, $2, $3, $4, $5, 'rejected', $6, $7, $8, $9)",
        device_id, lineage_id, meta.get("batch_id"), topic_kind, meta.get("source_table"),
        rej.code, None if rej.field is None else ledger_text(rej.field, 255),
        ledger_text(rej.detail, 2000), len(payload))
    return lineage_id if isinstance(lineage_id, uuid.UUID) else None


# --- many batches at once: the group writer's statements ------------------------------

SegmentKey = tuple[uuid.UUID, uuid.UUID]  # (device_id, batch_id)


async def redelivered_many(conn: Conn, keys: list[SegmentKey]) -> set[SegmentKey]:
    """Which of ``keys`` were accepted already; those take a new seen_seq, so the progress
    reporter confirms them once more and a device that missed the first confirmation
    stops re-sending. One statement for the whole group."""
    if not keys:
        return set()
    rows = await conn.fetch(
        "UPDATE edge_export_segments s SET seen_seq = nextval('edge_export_segments_seen_seq') "
        "FROM unnest($1::uuid[], $2::uuid[]) AS k(device_id, batch_id) "
        "WHERE s.device_id = k.device_id AND s.batch_id = k.batch_id "
        "AND s.outcome <> 'rejected' RETURNING s.device_id, s.batch_id",
        [k[0] for k in keys], [k[1] for k in keys])
    return {(r["device_id"], r["batch_id"]) for r in rows}


@dataclass(frozen=True, slots=True)
class Claim:
    """A ledger row to insert for an accepted batch (outcome settled later)."""

    device_id: uuid.UUID
    lineage_id: uuid.UUID
    batch_id: uuid.UUID
    topic_kind: str
    source_table: str
    schema_hash: str
    row_count: int
    payload_bytes: int
    journal_epoch: uuid.UUID | None = None
    first_commit_seq: int | None = None
    last_commit_seq: int | None = None
    batch_seq: int | None = None


async def claim_many(conn: Conn, claims: list[Claim]) -> dict[SegmentKey, int]:
    """Insert the ledger rows of a group, outcome ``materialized`` (``settle_many``
    changes the few that end staged); returns the segment id of each batch not accepted
    before. Runs in the transaction that writes the batches' rows, under their lineages'
    locks.

    Why ``materialized`` first: the dedupe indexes' predicate names ``outcome``, so an
    update of it is never a HOT update. Claimed ``staged`` and settled ``materialized``,
    every materialized batch wrote its ledger row twice, with every index entry twice
    (measured: ~1,500 of the ~15,000 WAL bytes of a 50-row state batch, and dead tuples
    for autovacuum). Nobody else sees the row before the transaction commits, and a
    failed transaction leaves nothing, so only the committed outcome is ever read."""
    if not claims:
        return {}
    cols = list(zip(*[(c.device_id, c.lineage_id, c.batch_id, c.topic_kind, c.source_table,
                       c.schema_hash, c.journal_epoch, c.first_commit_seq, c.last_commit_seq,
                       c.batch_seq, c.row_count, c.payload_bytes) for c in claims], strict=True))
    rows = await conn.fetch(
        "INSERT INTO edge_export_segments (device_id, lineage_id, batch_id, topic_kind, "
        "source_table, outcome, schema_hash, journal_epoch, first_commit_seq, last_commit_seq, "
        "batch_seq, row_count, payload_bytes) "
        "SELECT d, l, b, k, t, 'materialized', h, e, f, z, q, r, p FROM unnest($1::uuid[], "
        "$2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::uuid[], $8::bigint[], "
        "$9::bigint[], $10::bigint[], $11::int[], $12::int[]) AS c(d, l, b, k, t, h, e, f, z, "
        "q, r, p) "
        "ON CONFLICT (device_id, batch_id) WHERE outcome <> 'rejected' DO NOTHING "
        "RETURNING id, device_id, batch_id", *(list(c) for c in cols))
    return {(r["device_id"], r["batch_id"]): r["id"] for r in rows}


async def taken_batch_seqs(conn: Conn, keys: list[tuple[uuid.UUID, str, int, uuid.UUID]]
                           ) -> set[tuple[uuid.UUID, str, int]]:
    """Which ``(device_id, source_table, batch_seq)`` were accepted with another
    batch_id than the one given (``duplicate_batch_seq``)."""
    if not keys:
        return set()
    rows = await conn.fetch(
        "SELECT s.device_id, s.source_table, s.batch_seq FROM edge_export_segments s "
        "JOIN unnest($1::uuid[], $2::text[], $3::bigint[], $4::uuid[]) AS k(d, t, q, b) "
        "ON s.device_id = k.d AND s.source_table = k.t AND s.batch_seq = k.q "
        "WHERE s.batch_seq IS NOT NULL AND s.outcome <> 'rejected' AND s.batch_id <> k.b",
        *(list(c) for c in zip(*keys, strict=True)))
    return {(r["device_id"], r["source_table"], r["batch_seq"]) for r in rows}


async def settle_many(conn: Conn, materialized: list[tuple[uuid.UUID, int]],
                      staged: list[int], tail: CommitTail | None = None) -> None:
    """Count the rows of the materialized ``(lineage_id, rows)`` on their lineages, and
    mark the ledger rows of the ``staged`` segment ids staged, in one statement: run
    now, or with the COMMIT when ``tail`` is given (nothing reads its result). Its
    values are ids and counts, written as literals either way (one text for both)."""
    if not materialized and not staged:
        return
    lineage_ids = array_literal([m[0] for m in materialized], "uuid")
    rows = array_literal([m[1] for m in materialized], "bigint")
    sql = ("WITH seg AS (UPDATE edge_export_segments SET outcome = 'staged' "
           f"  WHERE id = ANY({array_literal(staged, 'bigint')})), "
           f"per AS (SELECT l, sum(n) AS n FROM unnest({lineage_ids}, {rows}) AS x(l, n) "
           "  GROUP BY l) "
           "UPDATE edge_table_lineages t SET materialized_rows = materialized_rows + per.n, "
           f"updated_at = now() FROM per WHERE t.id = per.l AND t.id = {any_of(lineage_ids)}")
    if tail is not None:
        tail.defer(sql)
    else:
        await conn.execute(sql)


async def note_quarantined(conn: Conn, counts: list[tuple[int, int]]) -> None:
    """``(segment_id, rows)``: that many rows of a materialized batch were quarantined
    instead of written (the slow path of a refused row only)."""
    if not counts:
        return
    await conn.execute(
        "UPDATE edge_export_segments s SET quarantined_rows = x.n "
        "FROM unnest($1::bigint[], $2::int[]) AS x(id, n) WHERE s.id = x.id",
        [c[0] for c in counts], [c[1] for c in counts])
