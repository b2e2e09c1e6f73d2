"""Reading the registry: entries and the coalesced mirrors (targets) they produced."""

from __future__ import annotations

import uuid
from typing import Any

from edgesync.errors import NotFoundError
from edgesync.store import Conn

__all__ = ["get_coalesced_mirror", "get_registry_entry", "list_coalesced_mirrors",
           "list_registry_entries"]

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


async def list_registry_entries(conn: Conn, project_id: uuid.UUID, *,
                                fleet_id: uuid.UUID | None = None,
                                status: str | None = None) -> list[dict[str, Any]]:
    rows = await conn.fetch(
        "SELECT r.*, (SELECT count(*) FROM edge_schema_versions v WHERE v.registry_id = r.id) "
        "AS device_count FROM edge_schema_registry r WHERE r.project_id = $1 "
        "AND ($2::uuid IS NULL OR r.fleet_id = $2) AND ($3::text IS NULL OR r.status = $3) "
        "ORDER BY r.created_at", project_id, fleet_id, status)
    return [dict(r) for r in rows]


async def get_registry_entry(conn: Conn, project_id: uuid.UUID,
                             registry_id: uuid.UUID) -> dict[str, Any]:
    row = await conn.fetchrow(
        "SELECT * FROM edge_schema_registry WHERE id = $1 AND project_id = $2",
        registry_id, project_id)
    if row is None:
        raise NotFoundError(f"registry entry {registry_id} not found")
    entry = dict(row)
    devices = await conn.fetch(
        "SELECT v.lineage_id, l.device_id, v.status FROM edge_schema_versions v "
        "JOIN edge_table_lineages l ON l.id = v.lineage_id WHERE v.registry_id = $1 "
        "ORDER BY v.first_seen_at", registry_id)
    entry["devices"] = [dict(d) for d in devices]
    return entry


async def list_coalesced_mirrors(conn: Conn, project_id: uuid.UUID, *,
                                 fleet_id: uuid.UUID | None = None,
                                 q: str | None = None) -> list[dict[str, Any]]:
    """One item per coalesced target: its scope, source table, the approved schema hashes
    writing to it and how many device lineages do (only those matching ``q``, if given)."""
    return [dict(r) for r in await conn.fetch(_MIRRORS, project_id, fleet_id, None, q or None)]


async def get_coalesced_mirror(conn: Conn, project_id: uuid.UUID,
                               target_table: str) -> dict[str, Any]:
    """A coalesced mirror by its table name (the mirror's id)."""
    row = await conn.fetchrow(_MIRRORS, project_id, None, target_table, None)
    if row is None:
        raise NotFoundError(f"coalesced mirror {target_table!r} not found")
    return dict(row)
