"""Consolidation: move device-scoped lineages into the coalesced target of their registry.

A project switched from ``schema_coalescing_mode = none`` to ``project``/``fleet`` keeps
its existing lineages on their device-scoped targets (``registry_key`` leaves them to
device reviews). ``consolidate`` moves them, one lineage at a time, each in its own
transaction under the lineage row lock:

1. the lineage's approved schema hash must have an **approved** registry entry in the
   lineage's scope (the project, or the device's fleet), else the lineage is skipped;
2. its rows are copied into the coalesced target: state rows (live rows and tombstones)
   keep their ``(journal_epoch, commit_seq)`` and go through the same newer-wins upsert
   as live batches; telemetry rows are appended (the device's rows of the old table);
3. ``approve_schema`` re-binds the approved hash to the registry's column actions and
   points the lineage at the coalesced target (a replay intent too, as for any approval);
   the schema version is linked to the registry entry;
4. ``integration.edge_table_lineage.consolidated.v1`` is emitted.

The old table is kept (never dropped, its rows never deleted). A consolidated lineage
is not a candidate again, so a second call changes nothing.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass

import asyncpg

from edgesync.errors import ConflictError, EdgesyncError, NotFoundError
from edgesync.fleet import CoalescingMode, ProjectPolicy
from edgesync.governance._bindings import approve_schema, plan_columns
from edgesync.governance._column_actions import ColumnAction
from edgesync.governance._events import EventType, emit
from edgesync.governance._lineages import Lineage, PauseReason, SyncAuthority
from edgesync.governance._registry import RegistryKey, registry_columns
from edgesync.governance._statuses import SchemaStatus
from edgesync.governance._versions import set_registry_id
from edgesync.materialize import MirrorColumn, copy_state_rows, copy_ts_rows
from edgesync.protocol import Pipeline
from edgesync.store import Conn, from_record

__all__ = ["CONSOLIDATED_EVENT", "ConsolidatedLineage", "Consolidation", "SkippedLineage",
           "consolidate"]

CONSOLIDATED_EVENT = EventType.LINEAGE_CONSOLIDATED

_CANDIDATES = """
SELECT l.id, d.fleet_id AS device_fleet_id
FROM edge_table_lineages l JOIN edge_devices d ON d.id = l.device_id
WHERE l.project_id = $1 AND l.source_table = $2 AND l.target_table IS NOT NULL
  AND ($3::uuid IS NULL OR d.fleet_id = $3)
ORDER BY l.created_at, l.id
"""


@dataclass(frozen=True, slots=True)
class ConsolidatedLineage:
    """A lineage moved into its coalesced target by this call."""

    lineage_id: uuid.UUID
    device_id: uuid.UUID
    pipeline: Pipeline
    schema_hash: str  # its approved schema, now bound to the registry's column actions
    registry_id: uuid.UUID
    from_table: str
    to_table: str
    rows_copied: int
    tombstones_copied: int
    old_table_kept: str | None  # None: it already wrote to the coalesced table


@dataclass(frozen=True, slots=True)
class SkippedLineage:
    """A lineage left where it is, and why (``reason``: the API's vocabulary of skips)."""

    lineage_id: uuid.UUID
    device_id: uuid.UUID
    pipeline: Pipeline
    schema_hash: str | None
    target_table: str | None
    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class Consolidation:
    source_table: str
    mode: str  # the project's coalescing mode: project | fleet
    fleet_id: uuid.UUID | None  # the fleet consolidated, or None: the whole project
    consolidated: tuple[ConsolidatedLineage, ...]  # empty on a repeated call
    skipped: tuple[SkippedLineage, ...]  # reported again on every call


class _Skip(Exception):
    """Control flow: this lineage is left as it is, for ``reason``."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason, self.detail = reason, detail


async def _mode(conn: Conn, project_id: uuid.UUID) -> str:
    policy = await conn.fetchval("SELECT policy FROM edge_projects WHERE id = $1", project_id)
    if policy is None:
        raise NotFoundError(f"project {project_id} not found")
    return str(ProjectPolicy.from_stored(policy).schema_coalescing_mode)


async def consolidate(conn: Conn, project_id: uuid.UUID, source_table: str, *,
                      fleet_id: uuid.UUID | None = None, actor: str) -> Consolidation:
    """Move every device lineage of ``source_table`` (of ``fleet_id``'s devices, when given)
    that still writes to a device-scoped target into its coalesced target.

    ``ConflictError`` when the project does not coalesce, or has no approved registry entry
    for the table in scope. Lineages already in their coalesced target are in neither of
    the answer's lists."""
    mode = await _mode(conn, project_id)
    if mode not in (CoalescingMode.PROJECT, CoalescingMode.FLEET):
        raise ConflictError(f"project schema_coalescing_mode is {mode!r}: consolidation needs "
                            "'project' or 'fleet' (PATCH /edge/policy first)")
    if fleet_id is not None and not await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM edge_fleets WHERE id = $1 AND project_id = $2)",
            fleet_id, project_id):
        raise NotFoundError(f"fleet {fleet_id} not found")
    approved = await conn.fetchval(
        "SELECT count(*) FROM edge_schema_registry WHERE project_id = $1 AND source_table = $2 "
        "AND status = 'approved' AND scope = $3 AND ($4::uuid IS NULL OR $3 = 'project' "
        "OR fleet_id = $4)", project_id, source_table, mode, fleet_id)
    if not approved:
        raise ConflictError(f"no approved registry entry for table {source_table!r} in "
                            f"{mode} scope: approve a registry review of it first")
    consolidated: list[ConsolidatedLineage] = []
    skipped: list[SkippedLineage] = []
    for cand in await conn.fetch(_CANDIDATES, project_id, source_table, fleet_id):
        try:
            async with conn.transaction():
                done = await _consolidate_one(conn, cand["id"], mode, cand["device_fleet_id"],
                                              actor)
        except _Skip as skip:
            skipped.append(await _skipped(conn, cand["id"], skip.reason, skip.detail))
            continue
        except (asyncpg.PostgresError, EdgesyncError) as exc:
            # The lineage's transaction rolled back: nothing of it changed.
            skipped.append(await _skipped(conn, cand["id"], "copy_failed", str(exc)))
            continue
        if done is not None:
            consolidated.append(done)
    return Consolidation(source_table, mode, fleet_id, tuple(consolidated), tuple(skipped))


async def _skipped(conn: Conn, lineage_id: uuid.UUID, reason: str,
                   detail: str) -> SkippedLineage:
    row = await conn.fetchrow(
        "SELECT id AS lineage_id, device_id, pipeline, approved_schema_hash AS schema_hash, "
        "target_table FROM edge_table_lineages WHERE id = $1", lineage_id)
    assert row is not None
    return from_record(SkippedLineage, row, reason=reason, detail=detail,
                       pipeline=Pipeline(row["pipeline"]))


def _key(mode: str, lineage: Lineage, device_fleet_id: uuid.UUID | None) -> RegistryKey:
    if mode == CoalescingMode.PROJECT:
        return RegistryKey(lineage.project_id, None, CoalescingMode.PROJECT,
                           lineage.pipeline, lineage.source_table)
    if device_fleet_id is None:
        raise _Skip("device_in_no_fleet", "coalescing mode is fleet and the device is in no "
                                          "fleet: it keeps device reviews")
    return RegistryKey(lineage.project_id, device_fleet_id, CoalescingMode.FLEET,
                       lineage.pipeline, lineage.source_table)


async def _consolidate_one(conn: Conn, lineage_id: uuid.UUID, mode: str,
                           device_fleet_id: uuid.UUID | None,
                           actor: str) -> ConsolidatedLineage | None:
    """One lineage, in the caller's transaction: the consolidation done, or None when it is
    already in its coalesced target. Raises ``_Skip`` (nothing written)."""
    row = await conn.fetchrow("SELECT * FROM edge_table_lineages WHERE id = $1 FOR UPDATE",
                              lineage_id)
    if row is None or row["target_table"] is None:
        return None  # deleted, or never approved, since the candidates were listed
    lineage = Lineage.from_record(row)
    key = _key(mode, lineage, device_fleet_id)
    schema_hash = lineage.approved_schema_hash
    if schema_hash is None:
        raise _Skip("not_approved", "the lineage has no approved schema")
    version = await conn.fetchrow(
        "SELECT id, registry_id FROM edge_schema_versions WHERE lineage_id = $1 "
        "AND schema_hash = $2", lineage.id, schema_hash)
    assert version is not None
    if lineage.target_table == key.target_table and version["registry_id"] is not None:
        return None  # already coalesced (a second call, or a device approved by the registry)
    if lineage.sync_authority == SyncAuthority.CLOUD:
        raise _Skip("cloud_authoritative", "coalesced targets are device-authoritative; set "
                                           "the lineage back to device_authoritative first")
    if lineage.pause_reason == PauseReason.DEFERRED_COLUMNS:
        raise _Skip("deferred_columns", "the lineage has deferred columns: decide them "
                                        "(reopen-review) first")
    pending = await conn.fetchval(
        "SELECT schema_hash FROM edge_schema_versions WHERE lineage_id = $1 "
        "AND status = 'pending' LIMIT 1", lineage.id)
    if pending is not None:
        raise _Skip("schema_review_open", f"schema {pending} of the lineage waits for a "
                                          "review: decide it first")
    # Same lock order as an admission: the lineage, then the registry entry FOR SHARE.
    entry = await conn.fetchrow(
        "SELECT * FROM edge_schema_registry WHERE scope_id = $1 AND pipeline = $2 "
        "AND source_table = $3 AND schema_hash = $4 FOR SHARE",
        key.scope_id, key.pipeline, key.source_table, schema_hash)
    if entry is None or entry["status"] != SchemaStatus.APPROVED:
        hashes = await conn.fetch(
            "SELECT schema_hash FROM edge_schema_registry WHERE scope_id = $1 "
            "AND pipeline = $2 AND source_table = $3 AND status = 'approved' "
            "ORDER BY created_at", key.scope_id, key.pipeline, key.source_table)
        raise _Skip("schema_not_in_registry",
                    f"the lineage's approved schema {schema_hash} "
                    + ("is not approved in the registry" if entry is None
                       else f"is {entry['status']} in the registry")
                    + f" (approved there: {', '.join(r['schema_hash'] for r in hashes) or 'none'})")
    columns = await registry_columns(conn, entry["id"])
    assert columns is not None
    actions = [ColumnAction.from_json(a) for a in entry["column_actions"]]
    mirrors = plan_columns(columns, actions)
    old_table, new_table = lineage.target_table, str(entry["target_table"])
    assert old_table is not None
    copy_map = await _copy_map(conn, lineage, schema_hash, mirrors)
    # Re-bind first: provisions the target (idempotent) with the registry's columns.
    await approve_schema(conn, lineage, version["id"], schema_hash, columns, actions, None,
                         coalesced_target=new_table)
    await set_registry_id(conn, version["id"], entry["id"])
    live = tombstones = 0
    if old_table != new_table:
        if lineage.pipeline == Pipeline.TELEMETRY:
            live = await copy_ts_rows(conn, lineage.device_id, old_table, new_table,
                                      mirrors, copy_map)
        else:
            live, tombstones = await copy_state_rows(conn, lineage.device_id, old_table,
                                                     new_table, copy_map)
    result = ConsolidatedLineage(
        lineage.id, lineage.device_id, lineage.pipeline, schema_hash, entry["id"], old_table,
        new_table, live, tombstones, old_table if old_table != new_table else None)
    fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    await emit(conn, lineage.project_id, CONSOLIDATED_EVENT, lineage.id,
               {**{k: str(v) if isinstance(v, uuid.UUID) else v for k, v in fields.items()},
                "source_table": lineage.source_table, "actor": actor})
    return result


async def _copy_map(conn: Conn, lineage: Lineage, schema_hash: str,
                    mirrors: list[MirrorColumn]) -> list[tuple[str, str, str]]:
    """(old column, new column, new type) for each column the registry mirrors that the
    lineage's own bindings mirrored too (and that exists in the old table). A column the
    device did not mirror has no history to copy: NULL in the copied rows."""
    rows = await conn.fetch(
        "SELECT source_column_name, mirror_column_name FROM edge_column_bindings "
        "WHERE lineage_id = $1 AND schema_hash = $2 AND action = 'mirror'",
        lineage.id, schema_hash)
    old = {r["source_column_name"]: r["mirror_column_name"] or r["source_column_name"]
           for r in rows}
    assert lineage.target_table is not None
    present = {r["attname"] for r in await conn.fetch(
        "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(quote_ident($1)) "
        "AND attnum > 0 AND NOT attisdropped", lineage.target_table)}
    return [(old[m.source], m.target, m.pg_type) for m in mirrors
            if m.source in old and old[m.source] in present]

