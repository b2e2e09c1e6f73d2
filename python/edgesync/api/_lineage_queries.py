"""Reads of lineages, always within one project, and the answer to a deletion."""

from __future__ import annotations

import uuid
from typing import Any

from edgesync.api._domain import model_of
from edgesync.api._errors import ApiError
from edgesync.api._lineage_models import (
    Binding,
    DeletedLineage,
    LineageDetail,
    LineageOut,
    MaterializationState,
    NextStep,
    ReplayIntent,
    ReplayProgress,
    RetiredColumnOut,
    SchemaVersion,
)
from edgesync.api._recovery_models import (
    RecoveryOfferOut,
    RecoveryState,
    ResnapshotOut,
    VerificationOut,
)
from edgesync.api._values import json_value
from edgesync.control import (
    AfterForget,
    OfferReason,
    RecoveryAction,
    recovery_jobs,
    recovery_offers,
)
from edgesync.errors import ApiErrorCode
from edgesync.governance import ReplayStatus, list_retired
from edgesync.materialize import PLATFORM_COLUMNS, quote_ident, table_columns
from edgesync.operations import LineageDeletion
from edgesync.protocol import Pipeline
from edgesync.store import Conn

__all__ = ["deleted_out", "get_lineage", "lineage_detail", "lineage_not_found", "list_lineages",
           "mirror_rows"]

# The last batch comes from the ledger's (lineage_id, id) index: one index probe per row.
_SELECT = """
SELECT l.*, d.name AS device_name,
       (SELECT s.received_at FROM edge_export_segments s WHERE s.lineage_id = l.id
        ORDER BY s.id DESC LIMIT 1) AS last_batch_at,
       fr.last_device_seen_at, fr.last_committed_at, fr.freshness_seconds
FROM edge_table_lineages l
JOIN edge_devices d ON d.id = l.device_id
LEFT JOIN edge_lineage_freshness fr ON fr.lineage_id = l.id
"""
# ``q`` (``$5``): a case-insensitive substring of the device name, source table, target
# table or pause reason, so a console's search covers every page, not just the one shown.
_FILTER = """
WHERE l.project_id = $1 AND ($2::uuid IS NULL OR l.device_id = $2)
  AND ($3::uuid IS NULL OR l.fleet_id = $3) AND ($4::text IS NULL OR l.status = $4)
  AND ($5::text IS NULL OR strpos(lower(concat_ws(' ', d.name, l.source_table,
       l.target_table, l.pause_reason)), lower($5)) > 0)
"""


def lineage_not_found() -> ApiError:
    return ApiError(404, ApiErrorCode.LINEAGE_NOT_FOUND, "lineage not found")


async def list_lineages(conn: Conn, project_id: uuid.UUID, *, device_id: uuid.UUID | None,
                        fleet_id: uuid.UUID | None, status: str | None, offset: int,
                        limit: int, q: str | None = None) -> tuple[list[LineageOut], int]:
    args = (project_id, device_id, fleet_id, status, q or None)
    total = await conn.fetchval("SELECT count(*) FROM edge_table_lineages l "
                                "JOIN edge_devices d ON d.id = l.device_id" + _FILTER, *args)
    rows = await conn.fetch(_SELECT + _FILTER + " ORDER BY d.name, l.source_table, l.id "
                            "OFFSET $6 LIMIT $7", *args, offset, limit)
    return [LineageOut.model_validate(dict(r)) for r in rows], int(total)


async def get_lineage(conn: Conn, project_id: uuid.UUID, lineage_id: uuid.UUID) -> LineageOut:
    row = await conn.fetchrow(_SELECT + "WHERE l.id = $1 AND l.project_id = $2",
                              lineage_id, project_id)
    if row is None:
        raise lineage_not_found()
    return LineageOut.model_validate(dict(row))


async def lineage_detail(conn: Conn, project_id: uuid.UUID,
                         lineage_id: uuid.UUID) -> LineageDetail:
    lineage = await get_lineage(conn, project_id, lineage_id)
    versions = await conn.fetch(
        "SELECT * FROM edge_schema_versions WHERE lineage_id = $1 ORDER BY first_seen_at, id",
        lineage_id)
    bindings = await conn.fetch(
        "SELECT * FROM edge_column_bindings WHERE lineage_id = $1 ORDER BY schema_hash, "
        "created_at, id", lineage_id)
    intents = await conn.fetch(
        "SELECT * FROM edge_replay_intents WHERE lineage_id = $1 ORDER BY created_at DESC, id "
        "LIMIT 10", lineage_id)
    staged = await conn.fetchrow(
        "SELECT count(*) AS batches, coalesce(sum(row_count), 0) AS rows, "
        "count(*) FILTER (WHERE staging_reason = 'materialization_failed') AS failed_batches, "
        "coalesce(sum(row_count) FILTER (WHERE staging_reason = 'materialization_failed'), 0) "
        "AS failed_rows FROM edge_staged_rows WHERE lineage_id = $1", lineage_id)
    pending = await conn.fetchval(
        "SELECT count(*) FROM edge_replay_intents WHERE lineage_id = $1 "
        f"AND status = '{ReplayStatus.PENDING}'", lineage_id)
    quarantined = await conn.fetchval(
        "SELECT count(*) FROM edge_quarantined_rows WHERE lineage_id = $1 AND status = 'open'",
        lineage_id)
    assert staged is not None
    resnapshot = (await recovery_jobs(conn, "resnapshot", lineage_id, offset=0, limit=1))[0]
    verification = (await recovery_jobs(conn, "verification", lineage_id, offset=0,
                                        limit=1))[0]
    offers = await recovery_offers(conn, lineage_id)
    retired = await list_retired(conn, lineage_id, lineage.target_table)
    return LineageDetail(
        **lineage.model_dump(),
        target_rows=await _target_rows(conn, lineage),
        schema_versions=[SchemaVersion.model_validate(dict(v)) for v in versions],
        bindings=[Binding.model_validate(dict(b)) for b in bindings],
        retired_columns=[model_of(RetiredColumnOut, r) for r in retired],
        replay=ReplayProgress(
            pending_intents=int(pending), staged_batches=int(staged["batches"]),
            staged_rows=int(staged["rows"]),
            intents=[ReplayIntent.model_validate(dict(i)) for i in intents]),
        materialization=MaterializationState(
            error_count=lineage.materialization_errors, last_error=lineage.last_error,
            failed_batches=int(staged["failed_batches"]), failed_rows=int(staged["failed_rows"]),
            quarantined_rows=int(quarantined)),
        recovery=RecoveryState(
            resnapshot=model_of(ResnapshotOut, resnapshot[0]) if resnapshot else None,
            verification=(model_of(VerificationOut, verification[0])
                          if verification else None)),
        recovery_offers=[RecoveryOfferOut.of(o) for o in offers],
    )


async def mirror_rows(conn: Conn, lineage: LineageOut, *, offset: int, limit: int
                      ) -> tuple[list[dict[str, Any]], int]:
    """Live (not deleted) rows of the lineage's state table, in primary-key order (the
    approved schema's key columns, then the key hash). A row is the mirror's columns as
    JSON (``json_value``), the table's own columns first and edgesync's bookkeeping
    (``device_id``, ``_edge_*``) after them: their names and types are the approved
    schema's, known only at run time, so a row stays a JSON object."""
    if lineage.pipeline != Pipeline.ROWS:
        raise ApiError(404, ApiErrorCode.MIRROR_NOT_PROVISIONED,
                       f"lineage {lineage.id} is a {lineage.pipeline} lineage: it has no state "
                       "table; read its rows with GET …/lineages/{id}/telemetry "
                       "(edgesync lineages telemetry ID)")
    columns = list(await table_columns(conn, lineage.target_table)
                   if lineage.target_table is not None else [])
    if not columns:
        raise ApiError(404, ApiErrorCode.MIRROR_NOT_PROVISIONED,
                       "this lineage has no state table yet: approve its schema review first")
    assert lineage.target_table is not None
    q = quote_ident(lineage.target_table)
    own = [c for c in columns if c not in PLATFORM_COLUMNS and not c.startswith("_edge_")]
    shown = [*own, *(c for c in columns if c not in own and c != "_edge_deleted")]
    keys = [c for c in await _key_columns(conn, lineage) if c in own]
    order = ", ".join([*map(quote_ident, keys), "_edge_pk_hash"])
    total = await conn.fetchval(
        f"SELECT count(*) FROM {q} WHERE device_id = $1 AND NOT _edge_deleted",
        lineage.device_id)
    rows = await conn.fetch(
        f"SELECT {', '.join(map(quote_ident, shown))} FROM {q} "
        f"WHERE device_id = $1 AND NOT _edge_deleted ORDER BY {order} OFFSET $2 LIMIT $3",
        lineage.device_id, offset, limit)
    out = [{k: json_value(v) for k, v in r.items()} for r in rows]
    return out, int(total)


async def _target_rows(conn: Conn, lineage: LineageOut) -> int | None:
    """The device's rows in the target now, beside ``materialized_rows`` (writes): by the
    target's (device_id, …) index; None before the target exists."""
    if lineage.target_table is None:
        return None
    columns = await table_columns(conn, lineage.target_table)
    if not columns:
        return None
    live = " AND NOT _edge_deleted" if "_edge_deleted" in columns else ""
    return int(await conn.fetchval(
        f"SELECT count(*) FROM {quote_ident(lineage.target_table)} WHERE device_id = $1{live}",
        lineage.device_id))


async def _key_columns(conn: Conn, lineage: LineageOut) -> list[str]:
    """The mirror columns of the approved schema's primary key, in key order."""
    rows = await conn.fetch(
        "SELECT coalesce(b.mirror_column_name, b.source_column_name) AS col "
        "FROM edge_schema_versions v "
        "CROSS JOIN LATERAL jsonb_array_elements(v.schema_columns -> 'columns') AS c "
        "JOIN edge_column_bindings b ON b.lineage_id = v.lineage_id "
        "AND b.schema_hash = v.schema_hash AND b.source_column_name = c ->> 'name' "
        "AND b.action = 'mirror' "
        "WHERE v.lineage_id = $1 AND v.schema_hash = $2 "
        "AND coalesce((c ->> 'pk_ordinal')::int, 0) > 0 "
        "ORDER BY (c ->> 'pk_ordinal')::int", lineage.id, lineage.approved_schema_hash)
    return [str(r["col"]) for r in rows]


def deleted_out(deleted: LineageDeletion) -> DeletedLineage:
    """The answer to a deletion: the device is told (``forget_lineage``) and starts the
    table over; the answer says so, and what to do once the table is back (verify it:
    docs/recovery.md)."""
    lineage = deleted.lineage
    # Verification is for state tables; a telemetry lineage has no next step.
    step = NextStep(
        action=RecoveryAction.VERIFY, reason=OfferReason.RECREATED_AFTER_DELETE,
        detail="Once the table is back (a new lineage of this device and table, approved), "
               "verify it: its state table kept the earlier rows, and the new lineage's "
               "detail offers the verification.") if lineage.pipeline == Pipeline.ROWS else None
    return DeletedLineage(
        id=lineage.id, device_id=lineage.device_id, source_table=lineage.source_table,
        forget_control_id=deleted.forget_control_id, device_will=AfterForget.RESEND_TABLE,
        next_step=step,
        detail=(f"The device is told to forget {lineage.source_table!r} "
                "(forget_lineage): it resumes the table and sends its schema and every "
                "current row again, and its next batch re-creates the lineage under review."))
