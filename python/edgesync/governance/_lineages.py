"""Lineages: one per (device, source table), shared by both pipelines.

This module is the one writer of ``edge_table_lineages`` (tests/architecture/
test_table_owners.py): its state transitions (``pause_lineage``, ``resume_lineage``: status,
pause_reason, paused_by_control, with their events) and its counters and settings; other
packages call these functions. The exception is the group writer's ``settle_many``
(``ingest._ledger``), which settles ledger rows and counts materialized rows in one statement
on the hot path."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

import asyncpg

from edgesync.fleet import DeviceScope
from edgesync.governance._events import EventType, emit
from edgesync.protocol import Pipeline
from edgesync.store import Conn, any_of

__all__ = ["Lineage", "LineageStatus", "PauseReason", "SyncAuthority", "add_staged",
           "bump_cloud_version", "count_materialized", "count_rejected", "delete_lineage_row",
           "get_lineage_for_update", "lock_lineages", "note_materialization_error",
           "note_schema_hash", "pause_lineage", "reset_materialization_errors",
           "resume_lineage", "set_approved", "set_approved_many", "set_sync_authority",
           "take_staged"]


class LineageStatus(enum.StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"


class PauseReason(enum.StrEnum):
    """Why a lineage is paused (``edge_table_lineages.pause_reason``)."""

    SCHEMA_REVIEW = "schema_review"  # a new schema waits for a review: the cloud stages
    DEFERRED_COLUMNS = "deferred_columns"  # approved with columns still to decide
    BACKPRESSURE = "backpressure"  # too much staged: the device is told to hold
    CIRCUIT_BREAKER = "circuit_breaker"  # batches keep failing to materialize


class SyncAuthority(enum.StrEnum):
    """Who wins for a state table (``edge_table_lineages.sync_authority``): the device
    (the default), or the cloud, which may then write rows back (docs/recovery.md)."""

    DEVICE = "device_authoritative"
    CLOUD = "cloud_authoritative"


# Pauses the device hears about (``pause_lineage`` control through the outbox).
DEVICE_PAUSES = frozenset({PauseReason.BACKPRESSURE, PauseReason.CIRCUIT_BREAKER})


@dataclass(frozen=True, slots=True)
class Lineage:
    id: uuid.UUID
    project_id: uuid.UUID
    device_id: uuid.UUID
    source_table: str
    pipeline: Pipeline
    status: LineageStatus
    pause_reason: PauseReason | None
    approved_schema_hash: str | None
    target_table: str | None
    sync_authority: SyncAuthority = SyncAuthority.DEVICE
    paused_by_control: bool = False

    @classmethod
    def from_record(cls, r: asyncpg.Record) -> Lineage:
        return cls(r["id"], r["project_id"], r["device_id"], r["source_table"],
                   Pipeline(r["pipeline"]), LineageStatus(r["status"]),
                   None if r["pause_reason"] is None else PauseReason(r["pause_reason"]),
                   r["approved_schema_hash"], r["target_table"],
                   SyncAuthority(r.get("sync_authority") or SyncAuthority.DEVICE),
                   bool(r.get("paused_by_control")))


async def get_lineage_for_update(conn: Conn, lineage_id: uuid.UUID
                                 ) -> Lineage | None:
    row = await conn.fetchrow("SELECT * FROM edge_table_lineages WHERE id = $1 FOR UPDATE",
                              lineage_id)
    return Lineage.from_record(row) if row else None


async def pause_lineage(conn: Conn, lineage: Lineage, reason: PauseReason, *,
                        detail: str | None = None) -> None:
    """Pause ``lineage`` for ``reason`` and emit ``lineage_paused``.

    * ``schema_review``: a paused lineage stays as it is.
    * ``deferred_columns`` (an approval left columns undecided): replaces no pause but a
      review's; the event only when the lineage was active.
    * ``backpressure`` / ``circuit_breaker`` (``DEVICE_PAUSES``): the device is told (the
      caller enqueues the control); takes over whatever paused the cloud side and marks
      the lineage ``paused_by_control``; the event carries ``detail``.
    """
    if reason in DEVICE_PAUSES:
        await conn.execute(
            "UPDATE edge_table_lineages SET status = 'paused', pause_reason = $2, "
            "paused_by_control = true, updated_at = now() WHERE id = $1", lineage.id, reason)
    elif reason == PauseReason.DEFERRED_COLUMNS:
        await conn.execute(
            "UPDATE edge_table_lineages SET status = 'paused', pause_reason = 'deferred_columns', "
            "updated_at = now() WHERE id = $1 AND (pause_reason IS NULL "
            "OR pause_reason IN ('schema_review', 'deferred_columns'))", lineage.id)
        if lineage.status == LineageStatus.PAUSED:
            return
    else:
        if lineage.status == LineageStatus.PAUSED:
            return
        await conn.execute(
            "UPDATE edge_table_lineages SET status = 'paused', pause_reason = $2, "
            "updated_at = now() WHERE id = $1", lineage.id, reason)
    body: dict[str, str] = {"lineage_id": str(lineage.id), "reason": reason}
    if detail is not None:
        body["detail"] = detail
    await emit(conn, lineage.project_id, EventType.LINEAGE_PAUSED, lineage.id, body)


async def resume_lineage(conn: Conn, lineage: Lineage, *, device: bool = False,
                         still_paused: PauseReason | None = None) -> bool:
    """Lift a pause and emit ``lineage_resumed`` when the lineage is active again; returns
    whether it is.

    ``device``: lift a device-visible pause (``DEVICE_PAUSES``): ``paused_by_control`` is
    cleared so the device may send again, but ``still_paused`` (an open review, deferred
    columns) keeps the cloud side paused for that reason."""
    if device:
        status = LineageStatus.ACTIVE if still_paused is None else LineageStatus.PAUSED
        await conn.execute(
            "UPDATE edge_table_lineages SET status = $2, pause_reason = $3, "
            "paused_by_control = false, updated_at = now() WHERE id = $1",
            lineage.id, status, still_paused)
        if still_paused is not None:
            return False
    else:
        if lineage.status == LineageStatus.ACTIVE:
            return True
        await conn.execute(
            "UPDATE edge_table_lineages SET status = 'active', pause_reason = NULL, "
            "updated_at = now() WHERE id = $1", lineage.id)
    await emit(conn, lineage.project_id, EventType.LINEAGE_RESUMED,
               lineage.id, {"lineage_id": str(lineage.id)})
    return True


# --- settings and counters (one function a statement; callers in other packages) ------


async def note_schema_hash(conn: Conn, lineage_id: uuid.UUID, schema_hash: str) -> None:
    """The schema the device sends now (``current_schema_hash``)."""
    await conn.execute(
        "UPDATE edge_table_lineages SET current_schema_hash = $2 WHERE id = $1 "
        "AND current_schema_hash IS DISTINCT FROM $2", lineage_id, schema_hash)


async def set_approved(conn: Conn, lineage_id: uuid.UUID, schema_hash: str, table: str
                       ) -> None:
    """An approval: the schema the lineage's rows are written with, and their target."""
    await conn.execute(
        "UPDATE edge_table_lineages SET approved_schema_hash = $2, target_table = $3, "
        "updated_at = now() WHERE id = $1", lineage_id, schema_hash, table)


async def set_approved_many(conn: Conn, approved: list[tuple[uuid.UUID, str, str]]
                            ) -> dict[uuid.UUID, Lineage]:
    """``(lineage_id, schema_hash, table)`` approved together (registry decisions);
    returns the lineages as they are now."""
    rows = await conn.fetch(
        "UPDATE edge_table_lineages t SET approved_schema_hash = u.h, current_schema_hash = u.h, "
        "target_table = u.tbl, updated_at = now() "
        "FROM unnest($1::uuid[], $2::text[], $3::text[]) AS u(id, h, tbl) WHERE t.id = u.id "
        f"AND t.id = {any_of(1)} RETURNING t.*",
        [a[0] for a in approved], [a[1] for a in approved], [a[2] for a in approved])
    return {r["id"]: Lineage.from_record(r) for r in rows}


async def set_sync_authority(conn: Conn, lineage_id: uuid.UUID,
                             sync_authority: SyncAuthority) -> None:
    await conn.execute("UPDATE edge_table_lineages SET sync_authority = $2, updated_at = now() "
                       "WHERE id = $1", lineage_id, sync_authority)


async def bump_cloud_version(conn: Conn, lineage_id: uuid.UUID) -> int:
    """The next ``cloud_version`` of a cloud-authoritative lineage's write-back."""
    return int(await conn.fetchval(
        "UPDATE edge_table_lineages SET cloud_version = cloud_version + 1, "
        "updated_at = now() WHERE id = $1 RETURNING cloud_version", lineage_id))


async def count_rejected(conn: Conn, device_id: uuid.UUID, source_table: str) -> object:
    """Count a rejected batch on the (device, table)'s lineage; its id, if there is one."""
    return await conn.fetchval(
        "UPDATE edge_table_lineages SET rejected_batches = rejected_batches + 1 "
        "WHERE device_id = $1 AND source_table = $2 RETURNING id", device_id, source_table)


async def count_materialized(conn: Conn, lineage_id: uuid.UUID, rows: int) -> None:
    await conn.execute(
        "UPDATE edge_table_lineages SET materialized_rows = materialized_rows + $2, "
        "updated_at = now() WHERE id = $1", lineage_id, rows)


async def add_staged(conn: Conn, lineage_ids: list[uuid.UUID], rows: list[int],
                     sizes: list[int]) -> None:
    """Staged batches (one entry each) onto their lineages' backlog counters."""
    await conn.execute(
        "WITH per AS (SELECT l, sum(r) AS r, sum(b) AS b FROM unnest($1::uuid[], $2::bigint[], "
        "  $3::bigint[]) AS x(l, r, b) GROUP BY l) "
        "UPDATE edge_table_lineages t SET staged_rows = staged_rows + per.r, "
        "staged_bytes = staged_bytes + per.b, updated_at = now() FROM per WHERE t.id = per.l "
        f"AND t.id = {any_of(1)}",
        lineage_ids, rows, sizes)


async def take_staged(conn: Conn, lineage_id: uuid.UUID, rows: int, size: int) -> None:
    """Staged batches gone (replayed or discarded): off the backlog counters."""
    await conn.execute(
        "UPDATE edge_table_lineages SET staged_rows = greatest(staged_rows - $2, 0), "
        "staged_bytes = greatest(staged_bytes - $3, 0), updated_at = now() WHERE id = $1",
        lineage_id, rows, size)


async def note_materialization_error(conn: Conn, lineage_id: uuid.UUID, errors: int,
                                     error: str) -> None:
    await conn.execute(
        "UPDATE edge_table_lineages SET materialization_errors = $2, last_error = $3, "
        "updated_at = now() WHERE id = $1", lineage_id, errors, error[:2000])


async def reset_materialization_errors(conn: Conn, lineage_id: uuid.UUID) -> None:
    await conn.execute(
        "UPDATE edge_table_lineages SET materialization_errors = 0, last_error = NULL, "
        "updated_at = now() WHERE id = $1", lineage_id)


async def delete_lineage_row(conn: Conn, lineage: Lineage) -> None:
    """Remove the lineage (its versions, reviews, bindings, staged rows, ledger entries
    and pending controls go with it, by cascade) and emit ``lineage_deleted``."""
    await conn.execute("DELETE FROM edge_table_lineages WHERE id = $1", lineage.id)
    await emit(conn, lineage.project_id, EventType.LINEAGE_DELETED, lineage.id,
               {"lineage_id": str(lineage.id), "device_id": str(lineage.device_id),
                "source_table": lineage.source_table})


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


# By index whatever the group's size (store.any_of).
_LOCK_MANY = (
    "SELECT l.* FROM edge_table_lineages l "
    "JOIN unnest($1::uuid[], $2::text[]) AS k(device_id, source_table) "
    "ON l.device_id = k.device_id AND l.source_table = k.source_table "
    f"WHERE l.device_id = {any_of(1)} ORDER BY l.id FOR UPDATE OF l")
