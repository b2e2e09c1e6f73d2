"""Schema versions (``edge_schema_versions``): one per (lineage, schema hash); this
module is their one writer. A version is ``pending`` until a review, a policy or the
registry decides it (``approved`` / ``rejected``); ``registry_id`` names the registry
entry deciding it under project or fleet coalescing."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from edgesync.governance._statuses import SchemaStatus
from edgesync.store import Conn, any_of

__all__ = ["detach_waiting", "fill_columns", "fill_columns_many", "insert_approved_many",
           "insert_version", "reject_waiting", "set_registry_id", "set_status"]


async def insert_version(conn: Conn, version_id: uuid.UUID, lineage_id: uuid.UUID,
                         schema_hash: str, columns: dict[str, Any] | None,
                         classification: str, diff: dict[str, Any]) -> None:
    """A schema first seen on the lineage (``pending``)."""
    await conn.execute(
        "INSERT INTO edge_schema_versions (id, lineage_id, schema_hash, schema_columns, "
        "classification, diff) VALUES ($1, $2, $3, $4, $5, $6)",
        version_id, lineage_id, schema_hash, columns, classification, diff)


async def insert_approved_many(conn: Conn, versions: list[tuple[Any, ...]]) -> None:
    """``(id, lineage_id, schema_hash, schema_columns json, classification, diff json,
    registry_id)`` of versions the registry approved already (new lineages together)."""
    await conn.execute(
        "INSERT INTO edge_schema_versions (id, lineage_id, schema_hash, schema_columns, "
        "classification, diff, registry_id, status) "
        "SELECT v.id, v.l, v.h, v.c::jsonb, v.k, v.d::jsonb, v.r, 'approved' FROM unnest("
        "$1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::uuid[]) "
        "AS v(id, l, h, c, k, d, r)", *(list(c) for c in zip(*versions, strict=True)))


async def fill_columns(conn: Conn, version_id: uuid.UUID, columns: dict[str, Any]) -> None:
    """The version's ``schema_columns``, first sent after its first batches."""
    await conn.execute("UPDATE edge_schema_versions SET schema_columns = $2 WHERE id = $1",
                       version_id, columns)


async def fill_columns_many(conn: Conn, lineage_ids: list[uuid.UUID], hashes: list[str],
                            columns_json: list[str]) -> None:
    """``fill_columns`` of versions that have none yet, by (lineage, hash), at once."""
    await conn.execute(
        "UPDATE edge_schema_versions v SET schema_columns = f.cols::jsonb "
        "FROM unnest($1::uuid[], $2::text[], $3::text[]) AS f(lineage_id, hash, cols) "
        "WHERE v.lineage_id = f.lineage_id AND v.schema_hash = f.hash "
        f"AND v.lineage_id = {any_of(1)} AND v.schema_columns IS NULL",
        lineage_ids, hashes, columns_json)


async def set_status(conn: Conn, version_id: uuid.UUID, status: SchemaStatus) -> None:
    await conn.execute("UPDATE edge_schema_versions SET status = $2 WHERE id = $1",
                       version_id, status)


async def set_registry_id(conn: Conn, version_id: uuid.UUID,
                          registry_id: uuid.UUID | None) -> None:
    """The registry entry that decides the version (None: its device's review)."""
    await conn.execute("UPDATE edge_schema_versions SET registry_id = $2 WHERE id = $1",
                       version_id, registry_id)


async def reject_waiting(conn: Conn, registry_id: uuid.UUID) -> None:
    """The registry rejected the hash: every version still waiting on it is rejected."""
    await conn.execute("UPDATE edge_schema_versions SET status = 'rejected' "
                       "WHERE registry_id = $1 AND status = 'pending'", registry_id)


async def detach_waiting(conn: Conn, registry_id: uuid.UUID) -> list[asyncpg.Record]:
    """The registry gave the hash back: the versions still waiting on it are their
    devices' to review (``id``, ``lineage_id``, ``classification`` of each)."""
    return await conn.fetch(
        "UPDATE edge_schema_versions SET registry_id = NULL WHERE registry_id = $1 "
        "AND status = 'pending' RETURNING id, lineage_id, classification", registry_id)


async def set_replay_as(conn: Conn, lineage_id: uuid.UUID, approved: str,
                        hashes: list[str]) -> None:
    """The rejected versions ``hashes`` of a lineage are written with the bindings of its
    approved version ``approved`` (docs/recovery.md, "Rows of a rejected schema version")."""
    await conn.execute(
        "UPDATE edge_schema_versions SET replay_as_schema_hash = $2 WHERE lineage_id = $1 "
        "AND schema_hash = ANY($3::text[])", lineage_id, approved, hashes)
