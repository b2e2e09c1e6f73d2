"""``edge_quarantined_rows``: rows kept apart because they could not be written.

The one module that writes the table. A row gets here when the COPY encoder or
PostgreSQL refuses it (``materialize.write_batches`` / ``write_rows_apart`` set it
apart); the other rows of its batch are written in the same transaction, and the
batch's ledger row settles as materialized with ``quarantined_rows`` counted.

Supersession (state rows): a quarantined change is ``superseded`` — kept for the
record, never retried — once a newer change of its key, ``(journal_epoch, commit_seq)``
higher, is in the mirror or in the quarantine. The ingest fast path never looks here:
the check runs when a row is quarantined and whenever quarantined rows are read,
retried or counted (``sweep``), so the status an operator sees is always current.
Telemetry rows have no key: they are never superseded.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import asyncpg

from edgesync._core import RowBatch, TelemetryBatch
from edgesync.materialize import WriteItem, quote_ident
from edgesync.protocol import Pipeline
from edgesync.store import Conn

__all__ = ["QuarantineStatus", "QuarantinedRow", "count_open", "discard", "get_row",
           "list_rows", "mark_attempt", "mark_retried", "open_rows", "quarantine_refused",
           "sweep"]


class QuarantineStatus(StrEnum):
    OPEN = "open"
    SUPERSEDED = "superseded"
    RETRIED = "retried"


@dataclass(frozen=True, slots=True)
class QuarantinedRow:
    id: int
    project_id: uuid.UUID
    lineage_id: uuid.UUID
    device_id: uuid.UUID
    segment_id: int | None
    pipeline: Pipeline
    source_table: str
    schema_hash: str
    batch_id: uuid.UUID
    journal_epoch: uuid.UUID | None
    commit_seq: int | None
    op: str | None
    pk_hash: str | None
    batch_seq: int | None
    event_ts: datetime | None
    row_id: uuid.UUID | None
    row_json: str
    reason_code: str
    reason: str
    reason_field: str | None
    status: QuarantineStatus
    attempts: int
    edited_by: str | None
    resolved_by: str | None
    quarantined_at: datetime
    updated_at: datetime
    resolved_at: datetime | None

    @classmethod
    def from_record(cls, r: asyncpg.Record) -> QuarantinedRow:
        values: dict[str, Any] = dict(r)
        values["status"] = QuarantineStatus(values["status"])
        values["pipeline"] = Pipeline(values["pipeline"])
        return cls(**values)


def _clean(text: str, limit: int = 2000) -> str:
    # PostgreSQL text holds no NUL; an error message may quote one from the data.
    return text.replace("\x00", "\\u0000")[:limit]


async def quarantine_refused(conn: Conn, *, project_id: uuid.UUID, lineage_id: uuid.UUID,
                             segment_id: int | None, item: WriteItem) -> int:
    """Quarantine the rows of ``item`` that were set apart (``item.refused``), in the
    caller's transaction; returns how many. Older open changes of the same keys become
    superseded, and so does a new row whose key already has a newer change."""
    if not item.refused:
        return 0
    b = item.batch
    recs: list[tuple[Any, ...]] = []
    for f in item.refused:
        if isinstance(b, RowBatch):
            seq, op, pk_hash, row_json = b.row_at(f.index)
            recs.append((uuid.UUID(b.journal_epoch), seq, op, pk_hash, None, None, None,
                         row_json, f.code, _clean(f.message), f.field))
        else:
            assert isinstance(b, TelemetryBatch)
            ts, row_id, row_json = b.row_at(f.index)
            recs.append((None, None, None, None, b.batch_seq, datetime.fromisoformat(ts),
                         uuid.UUID(row_id) if row_id else None, row_json, f.code,
                         _clean(f.message), f.field))
    cols = list(zip(*recs, strict=True))
    await conn.execute(
        "INSERT INTO edge_quarantined_rows (project_id, lineage_id, device_id, segment_id, "
        "pipeline, source_table, schema_hash, batch_id, journal_epoch, commit_seq, op, "
        "pk_hash, batch_seq, event_ts, row_id, row_json, reason_code, reason, reason_field) "
        "SELECT $1, $2, $3, $4, $5, $6, $7, $8, x.* FROM unnest($9::uuid[], $10::bigint[], "
        "$11::text[], $12::text[], $13::bigint[], $14::timestamptz[], $15::uuid[], "
        "$16::text[], $17::text[], $18::text[], $19::text[]) AS x",
        project_id, lineage_id, item.device_id, segment_id,
        Pipeline.ROWS if isinstance(b, RowBatch) else Pipeline.TELEMETRY, b.source_table,
        b.schema_hash,
        uuid.UUID(b.batch_id), *[list(c) for c in cols])
    if isinstance(b, RowBatch):
        await sweep(conn, lineage_id, item.target.table)
    return len(recs)


async def sweep(conn: Conn, lineage_id: uuid.UUID, target_table: str | None) -> int:
    """Mark superseded the open state rows of a lineage that a newer change of their key
    has overtaken (in the quarantine, or in the mirror ``target_table``); returns how
    many."""
    n = await conn.fetchval(
        "WITH s AS (UPDATE edge_quarantined_rows q SET status = 'superseded', "
        "  updated_at = now(), resolved_at = now() "
        "  WHERE q.lineage_id = $1 AND q.status = 'open' AND q.pk_hash IS NOT NULL "
        "  AND EXISTS (SELECT 1 FROM edge_quarantined_rows o WHERE o.lineage_id = $1 "
        "    AND o.pk_hash = q.pk_hash AND o.status <> 'superseded' AND o.id <> q.id "
        "    AND (o.journal_epoch, o.commit_seq) > (q.journal_epoch, q.commit_seq)) "
        "  RETURNING 1) SELECT count(*) FROM s", lineage_id)
    total = int(n)
    if target_table and await conn.fetchval("SELECT to_regclass(quote_ident($1)) IS NOT NULL",
                                            target_table):
        t = quote_ident(target_table)
        n = await conn.fetchval(
            f"WITH s AS (UPDATE edge_quarantined_rows q SET status = 'superseded', "
            "  updated_at = now(), resolved_at = now() "
            f"  FROM {t} t WHERE q.lineage_id = $1 AND q.status = 'open' "
            "  AND t.device_id = q.device_id AND t._edge_pk_hash = q.pk_hash "
            "  AND (t._edge_journal_epoch, t._edge_commit_seq) > (q.journal_epoch, q.commit_seq) "
            "  RETURNING 1) SELECT count(*) FROM s", lineage_id)
        total += int(n)
    return total


# ``q`` (``$3``): a case-insensitive substring of the reason code, reason, field, op or the
# row as sent (its key and values, as JSON text), so a search covers every page. strpos,
# not LIKE: ``%`` and ``_`` (common in values and column names) are themselves.
_LISTED = """
FROM edge_quarantined_rows WHERE lineage_id = $1 AND ($2::text IS NULL OR status = $2)
  AND ($3::text IS NULL OR strpos(lower(concat_ws(' ', reason_code, reason, reason_field,
       op, row_json)), lower($3)) > 0)
"""


async def list_rows(conn: Conn, lineage_id: uuid.UUID, *, status: QuarantineStatus | None,
                    offset: int, limit: int,
                    q: str | None = None) -> tuple[list[QuarantinedRow], int]:
    """A lineage's quarantined rows, oldest first (all, or of one ``status``; only those
    matching ``q``, if given)."""
    args = (lineage_id, status, q or None)
    rows = await conn.fetch("SELECT *" + _LISTED + "ORDER BY id OFFSET $4 LIMIT $5",
                            *args, offset, limit)
    total = await conn.fetchval("SELECT count(*)" + _LISTED, *args)
    return [QuarantinedRow.from_record(r) for r in rows], int(total)


async def get_row(conn: Conn, lineage_id: uuid.UUID, row_id: int, *,
                  for_update: bool = False) -> QuarantinedRow | None:
    lock = " FOR UPDATE" if for_update else ""
    r = await conn.fetchrow(
        f"SELECT * FROM edge_quarantined_rows WHERE lineage_id = $1 AND id = $2{lock}",
        lineage_id, row_id)
    return QuarantinedRow.from_record(r) if r else None


async def open_rows(conn: Conn, lineage_id: uuid.UUID, *, after: int,
                    limit: int) -> list[QuarantinedRow]:
    """Open rows of a lineage after id ``after``, oldest first, locked."""
    rows = await conn.fetch(
        "SELECT * FROM edge_quarantined_rows WHERE lineage_id = $1 AND status = 'open' "
        "AND id > $2 ORDER BY id LIMIT $3 FOR UPDATE", lineage_id, after, limit)
    return [QuarantinedRow.from_record(r) for r in rows]


async def count_open(conn: Conn, lineage_id: uuid.UUID) -> int:
    return int(await conn.fetchval(
        "SELECT count(*) FROM edge_quarantined_rows WHERE lineage_id = $1 AND status = 'open'",
        lineage_id))


async def mark_retried(conn: Conn, row_id: int, *, actor: str, row_json: str,
                       edited: bool) -> None:
    """The row was written (as ``row_json``)."""
    await conn.execute(
        "UPDATE edge_quarantined_rows SET status = 'retried', attempts = attempts + 1, "
        "row_json = $2, edited_by = CASE WHEN $4 THEN $3 ELSE edited_by END, "
        "resolved_by = $3, resolved_at = now(), updated_at = now() WHERE id = $1",
        row_id, row_json, actor, edited)


async def mark_attempt(conn: Conn, row_id: int, *, actor: str, row_json: str, edited: bool,
                       code: str, reason: str, field: str | None) -> None:
    """A retry failed again: the row stays open with the new reason (and the edit)."""
    await conn.execute(
        "UPDATE edge_quarantined_rows SET attempts = attempts + 1, row_json = $2, "
        "edited_by = CASE WHEN $4 THEN $3 ELSE edited_by END, reason_code = $5, "
        "reason = $6, reason_field = $7, updated_at = now() WHERE id = $1",
        row_id, row_json, actor, edited, code, _clean(reason), field)


async def discard(conn: Conn, lineage_id: uuid.UUID, row_id: int | None) -> int:
    """Delete one quarantined row, or every row of the lineage (any status); returns
    how many. The batch's ledger row stays: a redelivery is still a duplicate."""
    n = await conn.fetchval(
        "WITH d AS (DELETE FROM edge_quarantined_rows WHERE lineage_id = $1 "
        "AND ($2::bigint IS NULL OR id = $2) RETURNING 1) SELECT count(*) FROM d",
        lineage_id, row_id)
    return int(n)
