"""Column bindings: what an approved schema's columns become in the cloud.

``approve_schema`` is the one durable step shared by an operator's approval and
a policy auto-approval: provision the target, store bindings, schedule replay,
mark the version approved, and re-activate the lineage, all in the caller's
transaction, so a crash at any point leaves either all of it or none.

Deferred columns keep the lineage paused (``pause_reason = 'deferred_columns'``) and
schedule no replay: its rows stay staged until a reopened review decides every column.
"""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import orjson

from edgesync.errors import ConflictError, InvalidRequestError
from edgesync.governance._approval_check import (
    RetiredColumn,
    plan_actions,
    previous_mirrors,
    refused,
)
from edgesync.governance._column_actions import ColumnAction, ColumnActionKind
from edgesync.governance._lineages import (
    Lineage,
    LineageStatus,
    PauseReason,
    SyncAuthority,
    pause_lineage,
    resume_lineage,
    set_approved,
)
from edgesync.governance._mapping import resolve_mapped
from edgesync.governance._replay import schedule_replay
from edgesync.governance._retired import record_retired
from edgesync.governance._statuses import SchemaStatus
from edgesync.governance._target_cache import TargetColumns, target_cache
from edgesync.governance._versions import fill_columns_many, set_status
from edgesync.materialize import (
    TS_PLATFORM_COLUMNS,
    MappedColumn,
    MirrorColumn,
    StateTarget,
    TsTarget,
    lock_ddl,
    table_columns,
    target_table_name,
    ts_table_name,
)
from edgesync.protocol import Pipeline
from edgesync.store import Conn, any_of

__all__ = ["approve_schema", "device_target", "insert_bindings_many", "load_state_target",
           "load_state_targets", "plan_columns", "provision_target"]

# Pauses an approval may lift (any other reason, e.g. backpressure, outlives it).
_REVIEW_PAUSES = (PauseReason.SCHEMA_REVIEW, PauseReason.DEFERRED_COLUMNS, None)


def state_prefix(device_id: uuid.UUID) -> str:
    return f"edge_state_{device_id.hex[:8]}_"


async def load_state_target(conn: Conn, lineage: Lineage, schema_hash: str, *,
                            fill_schema_columns: dict[str, Any] | None = None
                            ) -> StateTarget | None:
    """The target and mirrored columns for batches of an approved schema hash.

    ``fill_schema_columns`` is stored as the version's ``schema_columns`` when it has
    none yet (its first batches came without them), in the same round trip."""
    if lineage.target_table is None:
        return None
    # The type each mirror column really has in the target (an operator may have altered
    # it): telemetry COPYs binary values straight into the table only when they agree.
    rows = await conn.fetch(
        "WITH fill AS (UPDATE edge_schema_versions SET schema_columns = $4 "
        "WHERE lineage_id = $1 AND schema_hash = $2 AND schema_columns IS NULL "
        "AND $4::jsonb IS NOT NULL) "
        "SELECT b.source_column_name, b.action, b.mirror_column_name, b.target_type, "
        "b.device_data_point_id, format_type(a.atttypid, a.atttypmod) AS stored_type "
        "FROM edge_column_bindings b LEFT JOIN pg_attribute a "
        "ON a.attrelid = to_regclass(quote_ident($3)) AND a.attname = b.mirror_column_name "
        "AND a.attnum > 0 AND NOT a.attisdropped "
        "WHERE b.lineage_id = $1 AND b.schema_hash = $2 "
        "AND b.action IN ('mirror', 'map', 'auto_create_and_map') ORDER BY b.id",
        lineage.id, schema_hash, lineage.target_table, fill_schema_columns)
    return _target(lineage, list(rows))


async def load_state_targets(conn: Conn, wanted: list[tuple[Lineage, str]], *,
                             fill_schema_columns: dict[uuid.UUID, dict[str, Any]] | None = None
                             ) -> dict[uuid.UUID, StateTarget]:
    """``load_state_target`` for many ``(lineage, schema_hash)`` in one round trip (two
    when ``fill_schema_columns``, by lineage id, has versions to fill); keyed by lineage
    id. Lineages without a target are left out."""
    wanted = [(lin, h) for lin, h in wanted if lin.target_table is not None]
    if not wanted:
        return {}
    fill = fill_schema_columns or {}
    if fill:
        await fill_columns_many(
            conn, [lin.id for lin, _ in wanted if lin.id in fill],
            [h for lin, h in wanted if lin.id in fill],
            [orjson.dumps(fill[lin.id]).decode() for lin, _ in wanted if lin.id in fill])
    out: dict[uuid.UUID, StateTarget] = {}
    unknown: list[tuple[Lineage, str]] = []
    for lin, h in wanted:
        assert lin.target_table is not None
        cached = target_cache.get((lin.id, h, lin.target_table))
        if cached is None:
            unknown.append((lin, h))
        else:
            out[lin.id] = _target_of(lin, cached)
    if not unknown:
        return out
    rows = await conn.fetch(
        "SELECT w.lineage_id, b.source_column_name, b.action, b.mirror_column_name, "
        "b.target_type, b.device_data_point_id, "
        "format_type(a.atttypid, a.atttypmod) AS stored_type "
        "FROM unnest($1::uuid[], $2::text[], $3::text[]) AS w(lineage_id, hash, tbl) "
        "JOIN edge_column_bindings b ON b.lineage_id = w.lineage_id AND b.schema_hash = w.hash "
        "LEFT JOIN pg_attribute a ON a.attrelid = to_regclass(quote_ident(w.tbl)) "
        "AND a.attname = b.mirror_column_name AND a.attnum > 0 AND NOT a.attisdropped "
        f"WHERE b.lineage_id = {any_of(1)} "
        "AND b.action IN ('mirror', 'map', 'auto_create_and_map') ORDER BY b.id",
        [lin.id for lin, _ in unknown], [h for _, h in unknown],
        [lin.target_table for lin, _ in unknown])
    by_lineage: dict[uuid.UUID, list[asyncpg.Record]] = {lin.id: [] for lin, _ in unknown}
    for r in rows:
        by_lineage[r["lineage_id"]].append(r)
    for lin, h in unknown:
        assert lin.target_table is not None
        columns = target_cache.put((lin.id, h, lin.target_table),
                                   _columns(by_lineage[lin.id]))
        out[lin.id] = _target_of(lin, columns)
    return out


def _columns(rows: list[asyncpg.Record]) -> TargetColumns:
    # In name order, not the bindings' (which differs between devices of one schema):
    # equal column sets are then equal, and kept once (target_cache).
    cols = tuple(sorted((MirrorColumn(r["source_column_name"], r["mirror_column_name"],
                                      r["target_type"], r["stored_type"])
                         for r in rows if r["action"] == ColumnActionKind.MIRROR),
                        key=lambda c: c.source))
    mapped = tuple(MappedColumn(r["source_column_name"], r["target_type"],
                                r["device_data_point_id"])
                   for r in rows if r["action"] != ColumnActionKind.MIRROR)
    return cols, mapped


def _target_of(lineage: Lineage, columns: TargetColumns) -> StateTarget:
    assert lineage.target_table is not None
    return StateTarget(lineage.target_table, list(columns[0]),
                       cloud_authoritative=lineage.sync_authority == SyncAuthority.CLOUD,
                       mapped=list(columns[1]))


def device_target(lineage: Lineage) -> str:
    """The lineage's target, or the one its first approval creates."""
    if lineage.target_table is not None:
        return lineage.target_table
    if lineage.pipeline == Pipeline.TELEMETRY:
        return ts_table_name(lineage.project_id, lineage.source_table)
    return target_table_name(state_prefix(lineage.device_id), lineage.source_table)


def _target(lineage: Lineage, rows: list[asyncpg.Record]) -> StateTarget:
    return _target_of(lineage, _columns(rows))


def _plan(columns: list[dict[str, Any]], actions: list[ColumnAction]
          ) -> tuple[list[MirrorColumn], list[ColumnAction]]:
    """The rules ``check_approval`` applies (``plan_actions``), for the approvals that do
    not go through it (a policy's auto-approval, a registry decision reaching a device,
    consolidation): a refusal raises as a refused approval does."""
    mirrors, refusals = plan_actions(columns, actions, pipeline=None, registry=False)
    if refusals:
        raise refused(refusals)
    return mirrors, actions


def plan_columns(columns: list[dict[str, Any]], actions: list[ColumnAction]
                 ) -> list[MirrorColumn]:
    """Validate one action per column; the mirrored columns they make."""
    return _plan(columns, actions)[0]


async def provision_target(conn: Conn, pipeline: str, table: str,
                           mirrors: list[MirrorColumn]) -> None:
    """Create the target (or add the columns a newer schema brings); refuses a column
    that exists with another type. A target that has every column already is left
    alone: no DDL, so no exclusive lock on a table many devices write (a coalesced
    target, each new device's approval)."""
    if pipeline == Pipeline.TELEMETRY:
        for mc in mirrors:
            if mc.target in TS_PLATFORM_COLUMNS:
                raise InvalidRequestError("column_actions", f"column {mc.target!r} is reserved "
                                          "in telemetry targets; give it a mirror_column_name")
    existing = await _check_existing_types(conn, table, mirrors)
    if existing and all(m.target in existing for m in mirrors):
        return
    # Another approval of the same (coalesced) target may be adding the same or other
    # columns: checked again under the table's DDL lock, with a query that sees what it
    # committed (a column it added with another type is refused, not silently kept).
    await lock_ddl(conn, table)
    existing = await _check_existing_types(conn, table, mirrors)
    if existing and all(m.target in existing for m in mirrors):
        return
    if pipeline == Pipeline.TELEMETRY:
        await TsTarget(table, mirrors).provision(conn)
    else:
        await StateTarget(table, mirrors).provision(conn)


async def _check_existing_types(conn: Conn, table: str,
                                mirrors: list[MirrorColumn]) -> dict[str, str]:
    """The target's columns and types (empty when there is no such table)."""
    existing = await table_columns(conn, table)
    for m in mirrors:
        if m.target in existing and existing[m.target] != m.pg_type:
            raise ConflictError(
                f"{table}.{m.target} already exists as {existing[m.target]}, not {m.pg_type}; "
                "choose another mirror_column_name or target_type")
    return existing


async def insert_bindings_many(conn: Conn, bindings: list[tuple[Any, ...]]) -> None:
    """``(id, lineage_id, schema_hash, source_column_name, action, mirror_column_name,
    target_type)`` of many lineages at once (registry-approved arrivals)."""
    await conn.execute(
        "INSERT INTO edge_column_bindings (id, lineage_id, schema_hash, source_column_name, "
        "action, mirror_column_name, target_type) SELECT * FROM unnest($1::uuid[], $2::uuid[], "
        "$3::text[], $4::text[], $5::text[], $6::text[], $7::text[])",
        *(list(c) for c in zip(*bindings, strict=True)))


async def approve_schema(conn: Conn, lineage: Lineage, version_id: uuid.UUID,
                         schema_hash: str, columns: list[dict[str, Any]],
                         actions: list[ColumnAction], review_id: uuid.UUID | None, *,
                         coalesced_target: str | None = None,
                         registry_review_id: uuid.UUID | None = None) -> bool:
    """Apply an approval; returns whether the lineage is active afterwards.

    ``coalesced_target`` names the shared table a registry decision chose (no owner
    check: devices share it by design)."""
    mirrors, _ = _plan(columns, actions)
    actions = await resolve_mapped(conn, lineage.project_id, columns, actions)
    table = coalesced_target or device_target(lineage)
    if lineage.pipeline != Pipeline.TELEMETRY:
        # Telemetry targets are coalesced per project: shared by design, no owner check.
        owner = None if coalesced_target else await conn.fetchval(
            "SELECT id FROM edge_table_lineages WHERE target_table = $1 AND id <> $2",
            table, lineage.id)
        if owner is not None:
            raise ConflictError(f"target table {table} already belongs to lineage {owner}")
    await provision_target(conn, lineage.pipeline, table, mirrors)
    # Read before set_approved moves the lineage on: the columns its approved bindings
    # wrote into this table that the new ones do not are retired, not silently stale.
    written = {m.target for m in mirrors}
    await record_retired(conn, lineage.id, table, schema_hash,
                         [RetiredColumn(t, typ, src) for t, typ, src in
                          await previous_mirrors(conn, [lineage.id], table) if t not in written],
                         sorted(written))
    by_source = {m.source: m for m in mirrors}
    rows = [(uuid.uuid4(), act.source_column_name, act.action,
             (m := by_source.get(act.source_column_name)) and m.target,
             m.pg_type if m else act.target_type, act.device_data_point_id) for act in actions]
    await conn.execute(
        "INSERT INTO edge_column_bindings (id, lineage_id, schema_hash, source_column_name, "
        "action, mirror_column_name, target_type, device_data_point_id) "
        "SELECT b.id, $1, $2, b.src, b.act, b.mirror, b.typ, b.dp FROM unnest($3::uuid[], "
        "$4::text[], $5::text[], $6::text[], $7::text[], $8::uuid[]) AS b(id, src, act, mirror, "
        "typ, dp) "
        "ON CONFLICT (lineage_id, schema_hash, source_column_name) DO UPDATE SET "
        "action = EXCLUDED.action, mirror_column_name = EXCLUDED.mirror_column_name, "
        "target_type = EXCLUDED.target_type, "
        "device_data_point_id = EXCLUDED.device_data_point_id",
        lineage.id, schema_hash, *(list(c) for c in zip(*rows, strict=True))
        if rows else ([], [], [], [], [], []))
    await set_status(conn, version_id, SchemaStatus.APPROVED)
    await set_approved(conn, lineage.id, schema_hash, table)
    if any(a.action == ColumnActionKind.DEFER for a in actions):
        # Undecided columns: nothing is materialized until a reopened review decides them.
        await pause_lineage(conn, lineage, PauseReason.DEFERRED_COLUMNS)
        return False
    await schedule_replay(conn, lineage.id, review_id=review_id,
                          registry_review_id=registry_review_id)
    if lineage.pause_reason in _REVIEW_PAUSES:
        await resume_lineage(conn, lineage)
        return True
    return lineage.status == LineageStatus.ACTIVE
