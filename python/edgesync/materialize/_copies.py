"""Writes of per-target tables outside the ingest path: a device's rows copied from one
target to another (registry consolidation) and the cloud's own rows of a
cloud-authoritative lineage (write-back). ``materialize`` writes every per-target table
(tests/architecture/test_table_owners.py)."""

from __future__ import annotations

import uuid
from datetime import datetime

from edgesync.materialize._identifiers import quote_ident
from edgesync.materialize._ts_target import TsTarget
from edgesync.materialize._types import MirrorColumn
from edgesync.store import Conn

__all__ = ["copy_state_rows", "copy_ts_rows", "upsert_cloud_row"]


async def copy_state_rows(conn: Conn, device_id: uuid.UUID, old: str, new: str,
                      copy_map: list[tuple[str, str, str]]) -> tuple[int, int]:
    """Live rows and tombstones, newer-wins on ``(journal_epoch, commit_seq)``: (live rows,
    tombstones) written."""
    platform = ["device_id", "_edge_pk_hash", "_edge_journal_epoch", "_edge_commit_seq",
                "_edge_deleted", "_edge_synced_at"]
    targets = [quote_ident(n) for _, n, _ in copy_map]
    sources = [f"{quote_ident(o)}::{t}" for o, _, t in copy_map]
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in [*platform[2:], *targets])
    row = await conn.fetchrow(
        f"WITH w AS (INSERT INTO {quote_ident(new)} AS t ({', '.join([*platform, *targets])}) "
        f"SELECT {', '.join([*platform, *sources])} FROM {quote_ident(old)} WHERE device_id = $1 "
        f"ON CONFLICT (device_id, _edge_pk_hash) DO UPDATE SET {updates} "
        "WHERE (t._edge_journal_epoch, t._edge_commit_seq) "
        "< (EXCLUDED._edge_journal_epoch, EXCLUDED._edge_commit_seq) "
        "RETURNING _edge_deleted) "
        "SELECT count(*) FILTER (WHERE NOT _edge_deleted) AS live, "
        "count(*) FILTER (WHERE _edge_deleted) AS dead FROM w", device_id)
    assert row is not None
    return int(row["live"]), int(row["dead"])


async def copy_ts_rows(conn: Conn, device_id: uuid.UUID, old: str, new: str,
                          mirrors: list[MirrorColumn],
                          copy_map: list[tuple[str, str, str]]) -> int:
    """The device's rows of the old (project-wide) table, appended: telemetry rows never
    change, and the lineage wrote none to the new table before (it wrote to the old one)."""
    span = await conn.fetchrow(
        f"SELECT min(event_ts) AS lo, max(event_ts) AS hi FROM {quote_ident(old)} "
        "WHERE device_id = $1", device_id)
    assert span is not None
    if span["lo"] is None:
        return 0
    lo: datetime = span["lo"]
    hi: datetime = span["hi"]
    await TsTarget(new, mirrors).ensure_partitions(conn, lo, hi)
    targets = [quote_ident(n) for _, n, _ in copy_map]
    sources = [f"{quote_ident(o)}::{t}" for o, _, t in copy_map]
    platform = ["device_id", "event_ts", "row_id"]
    status: str = await conn.execute(
        f"INSERT INTO {quote_ident(new)} ({', '.join([*platform, *targets])}) "
        f"SELECT {', '.join([*platform, *sources])} "
        f"FROM {quote_ident(old)} WHERE device_id = $1", device_id)
    return int(status.rsplit(" ", 1)[-1])


async def upsert_cloud_row(conn: Conn, table: str, device_id: uuid.UUID, pk_hash: str,
                           journal_epoch: uuid.UUID, cloud_version: int,
                           values: list[tuple[str, str, str | None]]) -> None:
    """The cloud's version of one row of a cloud-authoritative state table: ``values`` are
    ``(target column, pg type, value as text)``; the row is live again and carries
    ``cloud_version``."""
    args: list[object] = [device_id, pk_hash, journal_epoch, cloud_version]
    exprs = []
    for _, pg_type, value in values:
        args.append(value)
        exprs.append(f"CAST(${len(args)} AS text)::{pg_type}")
    names = [quote_ident(target) for target, _, _ in values]
    sets = "".join(f", {n} = EXCLUDED.{n}" for n in names)
    await conn.execute(
        f"INSERT INTO {quote_ident(table)} (device_id, _edge_pk_hash, "
        "_edge_journal_epoch, _edge_commit_seq, _edge_deleted, _edge_cloud_version"
        + "".join(f", {n}" for n in names) + ") VALUES ($1, $2, $3, 0, false, $4"
        + "".join(f", {e}" for e in exprs) + ") "
        "ON CONFLICT (device_id, _edge_pk_hash) DO UPDATE SET _edge_deleted = false, "
        "_edge_cloud_version = EXCLUDED._edge_cloud_version, _edge_synced_at = now()"
        + sets, *args)
