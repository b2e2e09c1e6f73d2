"""Re-snapshot on demand (docs/recovery.md): the cloud asks a device to send a state
table's current rows again, optionally only those a structured filter selects.

``request_resnapshot`` records the job (``edge_resnapshots``) and queues a
``resnapshot`` control in the same transaction. The device journals the selected rows
again in chunks, each as ``insert`` changes with new ``commit_seq`` values, and ships
each chunk as a ``bootstrap_snapshot`` upload; the cloud ingests those like any batch,
so the ordinary newer-wins rule merges them with live changes (a row changed after its
chunk was read has a newer ``commit_seq`` still). The device reports its progress
(``resnapshot_status``, ``record_resnapshot_status``); once it says ``completed`` every
chunk is committed, and rows of the job's scope the device no longer has are swept
(``materialize.sweep_state_rows``) when the scope is the whole table or hash buckets.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import asyncpg
import orjson

from edgesync.control._jobs import Resnapshot, ResnapshotStatus, recovery_job
from edgesync.control._outbox import enqueue_control
from edgesync.errors import InvalidRequestError, NotFoundError
from edgesync.governance import EventType, Lineage, emit, get_lineage_for_update
from edgesync.materialize import sweep_state_rows
from edgesync.protocol import ControlKind, Pipeline, SnapshotFilter, parse_filter, uuid7
from edgesync.store import Conn

__all__ = ["lineage_columns", "record_resnapshot_status", "request_resnapshot"]


_log = logging.getLogger(__name__)


_OPEN = (ResnapshotStatus.REQUESTED, ResnapshotStatus.RUNNING)


async def lineage_columns(conn: Conn, lineage: Lineage) -> tuple[dict[str, str], list[str]]:
    """``({source column: SQLite affinity}, primary key in order)`` of the lineage's
    approved schema (else its newest version)."""
    cols = await conn.fetchval(
        "SELECT schema_columns FROM edge_schema_versions WHERE lineage_id = $1 "
        "AND schema_columns IS NOT NULL ORDER BY (schema_hash = $2) DESC NULLS LAST, "
        "first_seen_at DESC LIMIT 1", lineage.id, lineage.approved_schema_hash)
    doc = orjson.loads(cols) if isinstance(cols, str) else cols
    columns = (doc or {}).get("columns") or []
    affinity = {str(c["name"]): str(c.get("decl_type_affinity") or "") for c in columns}
    pk = [str(c["name"]) for c in sorted((c for c in columns if c.get("pk_ordinal")),
                                         key=lambda c: int(c["pk_ordinal"]))]
    return affinity, pk


async def _rows_lineage(conn: Conn, project_id: uuid.UUID, lineage_id: uuid.UUID) -> Lineage:
    lineage = await get_lineage_for_update(conn, lineage_id)
    if lineage is None or lineage.project_id != project_id:
        raise NotFoundError(f"no lineage {lineage_id}")
    if lineage.pipeline != Pipeline.ROWS:
        raise InvalidRequestError(
            "lineage_id", f"lineage {lineage_id} is a {lineage.pipeline} lineage: re-snapshot "
            "and verification are offered for state (rows) lineages only")
    return lineage


async def request_resnapshot(conn: Conn, project_id: uuid.UUID, lineage_id: uuid.UUID, *,
                             filter_doc: Any = None, actor: str | None = None,
                             verification_id: uuid.UUID | None = None,
                             parsed: SnapshotFilter | None = None) -> Resnapshot:
    """Record a re-snapshot and queue its control (caller's transaction)."""
    lineage = await _rows_lineage(conn, project_id, lineage_id)
    if parsed is None:
        affinity, pk = await lineage_columns(conn, lineage)
        parsed = parse_filter(filter_doc, columns=set(affinity) if affinity else None,
                              key=pk or None)
    job_id = uuid.UUID(uuid7())
    doc = parsed.doc()
    await conn.execute(
        "INSERT INTO edge_resnapshots (id, project_id, lineage_id, device_id, filter, "
        "verification_id, requested_by) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        job_id, project_id, lineage_id, lineage.device_id, doc, verification_id, actor)
    await enqueue_control(conn, device_id=lineage.device_id, lineage_id=lineage_id,
                          kind=ControlKind.RESNAPSHOT,
                          body={"source_table": lineage.source_table, "job_id": str(job_id),
                                "filter": doc})
    await emit(conn, project_id, EventType.RESNAPSHOT_REQUESTED, lineage_id,
               {"lineage_id": str(lineage_id), "resnapshot_id": str(job_id), "filter": doc,
                "actor": actor, "verification_id": verification_id and str(verification_id)})
    return await recovery_job(conn, "resnapshot", job_id)


def _count(doc: dict[str, Any], key: str) -> int | None:
    v = doc.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


async def record_resnapshot_status(conn: Conn, device_id: uuid.UUID, table: str,
                                   doc: dict[str, Any]) -> str:
    """A device's ``resnapshot_status`` report; returns what it did (for the ledger's
    outcome detail). A report of a finished or unknown job changes nothing."""
    try:
        job_id = uuid.UUID(str(doc.get("job_id")))
        status = ResnapshotStatus(str(doc.get("status")))
        epoch = uuid.UUID(str(doc["journal_epoch"])) if doc.get("journal_epoch") else None
    except (ValueError, KeyError):
        raise InvalidRequestError("job_id", "resnapshot_status needs a job_id UUID, a status "
                                  "(running, completed, failed) and a journal_epoch UUID"
                                  ) from None
    row = await conn.fetchrow(
        "SELECT r.*, l.target_table, l.project_id AS lineage_project FROM edge_resnapshots r "
        "JOIN edge_table_lineages l ON l.id = r.lineage_id WHERE r.id = $1 AND r.device_id = $2 "
        "AND l.source_table = $3 FOR UPDATE OF r", job_id, device_id, table)
    if row is None or row["status"] not in _OPEN:
        return f"resnapshot {job_id}: nothing to update"
    first = _count(doc, "first_commit_seq")
    await conn.execute(
        "UPDATE edge_resnapshots SET status = $2, rows_sent = coalesce($3, rows_sent), "
        "chunks = coalesce($4, chunks), journal_epoch = coalesce($5, journal_epoch), "
        "first_commit_seq = coalesce($6, first_commit_seq), "
        "last_commit_seq = coalesce($7, last_commit_seq), error = $8, updated_at = now(), "
        "completed_at = CASE WHEN $2 IN ('completed', 'failed') THEN now() END WHERE id = $1",
        job_id, status, _count(doc, "rows"), _count(doc, "chunks"), epoch, first,
        _count(doc, "last_commit_seq"),
        str(doc.get("error"))[:500] if doc.get("error") else None)
    if status is ResnapshotStatus.RUNNING:
        return f"resnapshot {job_id}: running"
    swept = None
    if status is ResnapshotStatus.COMPLETED:
        swept = await _sweep(conn, row, epoch or row["journal_epoch"],
                             first if first is not None else row["first_commit_seq"])
    await emit(conn, row["project_id"], EventType.RESNAPSHOT_FINISHED, row["lineage_id"],
               {"lineage_id": str(row["lineage_id"]), "resnapshot_id": str(job_id),
                "status": status, "rows": _count(doc, "rows"), "swept_rows": swept,
                "error": doc.get("error")})
    return f"resnapshot {job_id}: {status}"


async def _sweep(conn: Conn, row: Any, epoch: uuid.UUID | None, first: int | None) -> int | None:
    """Rows of the job's scope the device no longer has (whole table or buckets only;
    a column or key filter is not translated to PostgreSQL)."""
    scope = parse_filter(row["filter"] if isinstance(row["filter"], dict)
                         else orjson.loads(row["filter"] or "{}"))
    if scope.terms or scope.key_range or epoch is None or first is None or \
            row["target_table"] is None:
        return None
    exists = await conn.fetchval("SELECT to_regclass(quote_ident($1)) IS NOT NULL",
                                 row["target_table"])
    if not exists:
        return None
    try:
        async with conn.transaction():  # a savepoint: a mirror altered by hand fails alone
            swept = await sweep_state_rows(
                conn, row["target_table"], device_id=row["device_id"],
                lineage_id=row["lineage_id"], epoch=epoch, first_seq=first,
                prefix=scope.prefix, buckets=sorted(scope.buckets) if scope.buckets else None)
    except asyncpg.PostgresError as exc:
        _log.warning("resnapshot %s: the sweep of %s failed: %s", row["id"],
                     row["target_table"], exc)
        return None
    await conn.execute("UPDATE edge_resnapshots SET swept_rows = $2 WHERE id = $1", row["id"],
                       swept)
    return swept
