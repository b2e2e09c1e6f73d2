"""Registry coalescing: one schema decision, and one target, per scope.

With project policy ``schema_coalescing_mode`` ``project`` (or ``fleet``), a device
schema version is decided by the registry entry ``(scope, pipeline, source_table,
schema_hash)`` of its project (or fleet) rather than by a device review:

* the first device with a new hash creates the entry and opens a registry review;
  its lineage pauses and stages as usual, and so does every device that follows
  while the review is open;
* approving the registry review provisions the coalesced target
  (``edge_state_p{project8}_{table}`` / ``edge_state_f{fleet8}_{table}``,
  ``edge_ts_p…`` / ``edge_ts_f…``) and approves every waiting device lineage;
* a device arriving later with an approved hash is approved on the spot.

Locking: ``admit`` holds the lineage row lock and then takes the entry ``FOR SHARE``;
a registry decision takes the entry ``FOR UPDATE`` (so it waits for admissions in
flight) and then each waiting lineage ``FOR UPDATE SKIP LOCKED``. A lineage it had to
skip is held by an admission that will read the decided entry and approve itself.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

from edgesync.fleet import CoalescingMode, DeviceScope
from edgesync.governance._bindings import approve_schema
from edgesync.governance._column_actions import ColumnAction
from edgesync.governance._lineages import Lineage
from edgesync.governance._review_queue import open_registry_review
from edgesync.governance._statuses import SchemaStatus
from edgesync.governance._versions import set_registry_id, set_status
from edgesync.materialize import target_table_name
from edgesync.protocol import Pipeline
from edgesync.store import Conn

__all__ = ["COALESCING_MODES", "RegistryKey", "RegistryRoute", "coalesced_table_name",
           "registry_columns", "registry_key", "route_version", "set_entry_decision",
           "set_entry_status"]

COALESCING_MODES = tuple(CoalescingMode)


class RegistryRoute(enum.StrEnum):
    """What the registry made of a pending device schema version (``route_version``)."""

    APPROVED = "approved"  # its entry is approved: bindings, target and replay in place
    WAITING = "waiting"  # a registry review is open, or the hash was rejected
    DEVICE_REVIEW = "device_review"  # the registry review was abandoned: a device review


@dataclass(frozen=True, slots=True)
class RegistryKey:
    project_id: uuid.UUID
    fleet_id: uuid.UUID | None
    scope: CoalescingMode  # project | fleet
    pipeline: Pipeline
    source_table: str

    @property
    def scope_id(self) -> uuid.UUID:
        return self.fleet_id if self.fleet_id is not None else self.project_id

    @property
    def target_table(self) -> str:
        return coalesced_table_name(self.pipeline, self.scope, self.scope_id, self.source_table)


def coalesced_table_name(pipeline: str, scope: str, scope_id: uuid.UUID,
                         source_table: str) -> str:
    kind = "ts" if pipeline == Pipeline.TELEMETRY else "state"
    return target_table_name(f"edge_{kind}_{scope[0]}{scope_id.hex[:8]}_", source_table)


def registry_key(scope: DeviceScope, lineage: Lineage) -> RegistryKey | None:
    """The registry that decides this lineage's schemas, or None (device reviews): mode
    ``none``, ``fleet`` for a device in no fleet, or a lineage that already writes to a
    device-scoped target (until ``consolidate`` moves it, ``_consolidate``)."""
    mode = scope.policy.schema_coalescing_mode
    if mode == CoalescingMode.PROJECT:
        key = RegistryKey(scope.project_id, None, CoalescingMode.PROJECT,
                          lineage.pipeline, lineage.source_table)
    elif mode == CoalescingMode.FLEET and scope.fleet_id is not None:
        key = RegistryKey(scope.project_id, scope.fleet_id, CoalescingMode.FLEET,
                          lineage.pipeline, lineage.source_table)
    else:
        return None
    if lineage.target_table not in (None, key.target_table):
        return None
    return key


async def registry_columns(conn: Conn, entry_id: uuid.UUID) -> list[dict[str, Any]] | None:
    """The columns of a registry entry's schema: its own, or any device's that sent them
    (each the JSON document a device sends and the schema hash is made of: name,
    ``decl_type_affinity``, ``pk_ordinal``, ``not_null``)."""
    doc = await conn.fetchval(
        "SELECT coalesce(r.schema_columns, (SELECT v.schema_columns FROM edge_schema_versions v "
        "  WHERE v.registry_id = r.id AND v.schema_columns IS NOT NULL LIMIT 1)) "
        "FROM edge_schema_registry r WHERE r.id = $1", entry_id)
    return list(doc["columns"]) if doc else None


async def _entry_for_share(conn: Conn, key: RegistryKey, schema_hash: str,
                           columns: list[dict[str, Any]] | None,
                           classification: str) -> asyncpg.Record:
    """The registry entry of ``(key, schema_hash)``, made when missing, locked FOR SHARE."""
    await conn.execute(
        "INSERT INTO edge_schema_registry (id, project_id, fleet_id, scope, scope_id, pipeline, "
        "source_table, schema_hash, schema_columns, classification) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) "
        "ON CONFLICT (scope_id, pipeline, source_table, schema_hash) DO NOTHING",
        uuid.uuid4(), key.project_id, key.fleet_id, key.scope, key.scope_id, key.pipeline,
        key.source_table, schema_hash,
        {"table_name": key.source_table, "columns": columns} if columns else None,
        classification)
    row = await conn.fetchrow(
        "SELECT * FROM edge_schema_registry WHERE scope_id = $1 AND pipeline = $2 "
        "AND source_table = $3 AND schema_hash = $4 FOR SHARE",
        key.scope_id, key.pipeline, key.source_table, schema_hash)
    assert row is not None
    return row


async def route_version(conn: Conn, key: RegistryKey, lineage: Lineage,
                        version_id: uuid.UUID, schema_hash: str,
                        columns: list[dict[str, Any]] | None, classification: str
                        ) -> RegistryRoute:
    """Let the registry decide a pending device schema version. Returns ``approved``
    (bindings, target and replay intent are in place), ``waiting`` (a registry review
    is open, or the hash was rejected) or ``device_review`` (the registry review was
    abandoned: the caller opens a device review)."""
    entry = await _entry_for_share(conn, key, schema_hash, columns, classification)
    if entry["status"] == SchemaStatus.ABANDONED:
        await set_registry_id(conn, version_id, None)
        return RegistryRoute.DEVICE_REVIEW
    await set_registry_id(conn, version_id, entry["id"])
    if entry["status"] == SchemaStatus.APPROVED:
        cols = await registry_columns(conn, entry["id"])
        assert cols is not None
        actions = [ColumnAction.from_json(a) for a in entry["column_actions"]]
        await approve_schema(conn, lineage, version_id, schema_hash, cols, actions, None,
                             coalesced_target=entry["target_table"])
        return RegistryRoute.APPROVED
    if entry["status"] == SchemaStatus.REJECTED:
        await set_status(conn, version_id, SchemaStatus.REJECTED)
        return RegistryRoute.WAITING
    await open_registry_review(conn, entry)
    return RegistryRoute.WAITING


async def set_entry_status(conn: Conn, registry_id: uuid.UUID, status: str) -> None:
    """A registry review decided the entry (``approved``, ``rejected``, ``abandoned``)."""
    await conn.execute("UPDATE edge_schema_registry SET status = $2, updated_at = now() "
                       "WHERE id = $1", registry_id, status)


async def set_entry_decision(conn: Conn, registry_id: uuid.UUID, table: str,
                             column_actions: list[dict[str, Any]]) -> None:
    """The coalesced target and column actions every device of the scope inherits."""
    await conn.execute(
        "UPDATE edge_schema_registry SET target_table = $2, column_actions = $3 "
        "WHERE id = $1", registry_id, table, column_actions)
