"""Lineages: one per (device, source table), shared by both pipelines."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

import asyncpg

from edgesync.governance._events import EventType, emit
from edgesync.registry import DeviceScope
from edgesync.store import Conn

__all__ = ["Lineage", "LineageStatus", "PauseReason", "get_lineage_for_update", "lock_lineages",
           "pause_lineage", "resume_lineage"]


class LineageStatus(enum.StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"


class PauseReason(enum.StrEnum):
    """Why a lineage is paused (``edge_table_lineages.pause_reason``)."""

    SCHEMA_REVIEW = "schema_review"  # a new schema waits for a review: the cloud stages
    DEFERRED_COLUMNS = "deferred_columns"  # approved with columns still to decide
    BACKPRESSURE = "backpressure"  # too much staged: the device is told to hold
    CIRCUIT_BREAKER = "circuit_breaker"  # batches keep failing to materialize


@dataclass(frozen=True, slots=True)
class Lineage:
    id: uuid.UUID
    project_id: uuid.UUID
    device_id: uuid.UUID
    source_table: str
    pipeline: str
    status: str
    pause_reason: str | None
    approved_schema_hash: str | None
    target_table: str | None
    sync_authority: str = "device_authoritative"

    @classmethod
    def from_record(cls, r: asyncpg.Record) -> Lineage:
        return cls(r["id"], r["project_id"], r["device_id"], r["source_table"], r["pipeline"],
                   r["status"], r["pause_reason"], r["approved_schema_hash"], r["target_table"],
                   r.get("sync_authority") or "device_authoritative")


async def get_lineage_for_update(conn: Conn, lineage_id: uuid.UUID
                                 ) -> Lineage | None:
    row = await conn.fetchrow("SELECT * FROM edge_table_lineages WHERE id = $1 FOR UPDATE",
                              lineage_id)
    return Lineage.from_record(row) if row else None


async def pause_lineage(conn: Conn, lineage: Lineage, reason: PauseReason) -> None:
    if lineage.status == LineageStatus.PAUSED:
        return
    await conn.execute(
        "UPDATE edge_table_lineages SET status = 'paused', pause_reason = $2, updated_at = now() "
        "WHERE id = $1", lineage.id, reason)
    await emit(conn, lineage.project_id, EventType.LINEAGE_PAUSED,
               lineage.id, {"lineage_id": str(lineage.id), "reason": reason})


async def resume_lineage(conn: Conn, lineage: Lineage) -> None:
    if lineage.status == LineageStatus.ACTIVE:
        return
    await conn.execute(
        "UPDATE edge_table_lineages SET status = 'active', pause_reason = NULL, "
        "updated_at = now() WHERE id = $1", lineage.id)
    await emit(conn, lineage.project_id, EventType.LINEAGE_RESUMED,
               lineage.id, {"lineage_id": str(lineage.id)})


async def lock_lineages(conn: Conn, wanted: list[tuple[DeviceScope, str, str]]
                        ) -> dict[tuple[uuid.UUID, str], Lineage]:
    """Get-or-create the lineages of ``(scope, source_table, pipeline)`` and hold their
    row locks until the transaction ends, so governance decisions for one lineage are
    taken one at a time. Two round trips, three when some lineages are new. Rows are
    locked in ``id`` order (and new keys inserted in key order), so two groups sharing
    lineages never deadlock."""
    keys = sorted({(s.device_id, table): (s, pipeline) for s, table, pipeline in wanted}.items(),
                  key=lambda kv: (kv[0][0].bytes, kv[0][1]))
    devices = [k[0] for k, _ in keys]
    tables = [k[1] for k, _ in keys]
    found = {(r["device_id"], r["source_table"]): Lineage.from_record(r)
             for r in await conn.fetch(_LOCK_MANY, devices, tables)}
    missing = [(k, v) for k, v in keys if k not in found]
    if missing:
        await conn.execute(
            "INSERT INTO edge_table_lineages (id, project_id, fleet_id, device_id, "
            "source_table, pipeline) SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], "
            "$4::uuid[], $5::text[], $6::text[]) ON CONFLICT (device_id, source_table) DO NOTHING",
            [uuid.uuid4() for _ in missing], [s.project_id for _, (s, _) in missing],
            [s.fleet_id for _, (s, _) in missing], [k[0] for k, _ in missing],
            [k[1] for k, _ in missing], [p for _, (_, p) in missing])
        found.update({(r["device_id"], r["source_table"]): Lineage.from_record(r)
                      for r in await conn.fetch(_LOCK_MANY, [k[0] for k, _ in missing],
                                                [k[1] for k, _ in missing])})
    return found


_LOCK_MANY = (
    "SELECT l.* FROM edge_table_lineages l "
    "JOIN unnest($1::uuid[], $2::text[]) AS k(device_id, source_table) "
    "ON l.device_id = k.device_id AND l.source_table = k.source_table "
    "ORDER BY l.id FOR UPDATE OF l")
