"""Reading the registry: entries and the coalesced mirrors (targets) they produced."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import asyncpg

from edgesync.errors import NotFoundError
from edgesync.governance._classify import Classification
from edgesync.governance._statuses import SchemaStatus
from edgesync.protocol import Pipeline
from edgesync.store import Conn, from_record

__all__ = ["CoalescedMirror", "RegistryDevice", "RegistryEntry", "RegistryEntryDetail",
           "get_coalesced_mirror", "get_registry_entry", "list_coalesced_mirrors",
           "list_registry_entries"]

E = TypeVar("E", bound="RegistryEntry")

# ``q`` (``$4``): a case-insensitive substring of the target or source table or of the name
# of a device writing to it (strpos: ``%`` and ``_`` are themselves, not wildcards).
_MIRRORS = """
SELECT r.target_table, r.scope, r.fleet_id, r.pipeline, r.source_table,
       array_agg(r.schema_hash ORDER BY r.created_at) AS schema_hashes,
       min(r.created_at) AS created_at,
       (SELECT count(*) FROM edge_table_lineages l WHERE l.target_table = r.target_table
          AND l.project_id = r.project_id) AS device_count
FROM edge_schema_registry r
WHERE r.project_id = $1 AND r.status = 'approved' AND ($2::uuid IS NULL OR r.fleet_id = $2)
  AND ($3::text IS NULL OR r.target_table = $3)
  AND ($4::text IS NULL
       OR strpos(lower(concat_ws(' ', r.target_table, r.source_table)), lower($4)) > 0
       OR EXISTS (SELECT 1 FROM edge_table_lineages l JOIN edge_devices d ON d.id = l.device_id
                  WHERE l.project_id = r.project_id AND l.target_table = r.target_table
                    AND strpos(lower(d.name), lower($4)) > 0))
GROUP BY r.project_id, r.target_table, r.scope, r.fleet_id, r.pipeline, r.source_table
ORDER BY r.target_table
"""

# An entry and how many device schema versions are linked to it.
_ENTRY = """
SELECT r.*, (SELECT count(*) FROM edge_schema_versions v WHERE v.registry_id = r.id)
       AS device_count
FROM edge_schema_registry r
"""


@dataclass(frozen=True, slots=True)
class RegistryEntry:
    """A registry entry: one schema of a source table at project or fleet scope."""

    id: uuid.UUID
    project_id: uuid.UUID
    fleet_id: uuid.UUID | None  # set for fleet scope
    scope: str  # project | fleet
    pipeline: Pipeline
    source_table: str
    schema_hash: str
    classification: Classification
    status: SchemaStatus
    target_table: str | None  # the coalesced target, once approved
    # JSON, as stored: the decision (``ColumnAction.as_json`` each) and the columns as
    # the devices sent them (``{"table_name", "columns": [...]}``).
    column_actions: list[dict[str, Any]] | None
    schema_columns: dict[str, Any] | None
    device_count: int  # device schema versions linked to the entry
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class RegistryDevice:
    """A device lineage linked to a registry entry, and its schema version's status."""

    lineage_id: uuid.UUID
    device_id: uuid.UUID
    status: SchemaStatus


@dataclass(frozen=True, slots=True)
class RegistryEntryDetail(RegistryEntry):
    devices: tuple[RegistryDevice, ...]


@dataclass(frozen=True, slots=True)
class CoalescedMirror:
    """A coalesced target: its scope, source table, the approved schema hashes writing to
    it and how many device lineages do."""

    target_table: str
    scope: str
    fleet_id: uuid.UUID | None
    pipeline: Pipeline
    source_table: str
    schema_hashes: tuple[str, ...]
    device_count: int
    created_at: datetime


def _entry(cls: type[E], rec: asyncpg.Record | Mapping[str, Any], **given: Any) -> E:
    """A registry entry (or its detail) from its row, the words as their enums."""
    return from_record(cls, rec, status=SchemaStatus(rec["status"]),
                       pipeline=Pipeline(rec["pipeline"]),
                       classification=Classification(rec["classification"]), **given)


async def list_registry_entries(conn: Conn, project_id: uuid.UUID, *,
                                fleet_id: uuid.UUID | None = None,
                                status: str | None = None) -> list[RegistryEntry]:
    rows = await conn.fetch(
        _ENTRY + "WHERE r.project_id = $1 AND ($2::uuid IS NULL OR r.fleet_id = $2) "
        "AND ($3::text IS NULL OR r.status = $3) ORDER BY r.created_at",
        project_id, fleet_id, status)
    return [_entry(RegistryEntry, r) for r in rows]


async def get_registry_entry(conn: Conn, project_id: uuid.UUID,
                             registry_id: uuid.UUID) -> RegistryEntryDetail:
    row = await conn.fetchrow(_ENTRY + "WHERE r.id = $1 AND r.project_id = $2",
                              registry_id, project_id)
    if row is None:
        raise NotFoundError(f"registry entry {registry_id} not found")
    devices = await conn.fetch(
        "SELECT v.lineage_id, l.device_id, v.status FROM edge_schema_versions v "
        "JOIN edge_table_lineages l ON l.id = v.lineage_id WHERE v.registry_id = $1 "
        "ORDER BY v.first_seen_at", registry_id)
    return _entry(RegistryEntryDetail, row,
                       devices=tuple(RegistryDevice(d["lineage_id"], d["device_id"],
                                                    SchemaStatus(d["status"]))
                                     for d in devices))


def _mirror(rec: asyncpg.Record) -> CoalescedMirror:
    return from_record(CoalescedMirror, rec, schema_hashes=tuple(rec["schema_hashes"]),
                       pipeline=Pipeline(rec["pipeline"]))


async def list_coalesced_mirrors(conn: Conn, project_id: uuid.UUID, *,
                                 fleet_id: uuid.UUID | None = None,
                                 q: str | None = None) -> list[CoalescedMirror]:
    """One item per coalesced target (only those matching ``q``, if given)."""
    return [_mirror(r) for r in await conn.fetch(_MIRRORS, project_id, fleet_id, None,
                                                 q or None)]


async def get_coalesced_mirror(conn: Conn, project_id: uuid.UUID,
                               target_table: str) -> CoalescedMirror:
    """A coalesced mirror by its table name (the mirror's id)."""
    row = await conn.fetchrow(_MIRRORS, project_id, None, target_table, None)
    if row is None:
        raise NotFoundError(f"coalesced mirror {target_table!r} not found")
    return _mirror(row)
