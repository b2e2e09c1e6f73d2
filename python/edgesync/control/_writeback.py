"""Cloud state write-back for ``cloud_authoritative`` state tables.

The cloud upserts its rows into the lineage's ``edge_state_*`` table with a new
``cloud_version`` and, in the same transaction, queues a ``state_write`` control that
carries the rows and that version to the device. The device applies them without
journaling them back, and quotes the version it last saw (``lkcv``) when it later
changes those rows itself (rule in docs/protocol.md, "Write-back").
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg
import orjson

from edgesync import _core
from edgesync.control._outbox import enqueue_control
from edgesync.errors import ApiErrorCode, InvalidRequestError, NotFoundError, StateWriteError
from edgesync.governance import (
    SyncAuthority,
    bump_cloud_version,
    get_lineage_for_update,
    load_state_target,
)
from edgesync.materialize import MirrorColumn, quote_ident, upsert_cloud_row
from edgesync.protocol import ControlKind, Pipeline
from edgesync.store import Conn

__all__ = ["MAX_WRITE_ROWS", "StateWrite", "resend_cloud_rows", "write_state_rows"]

MAX_WRITE_ROWS = 500
_NIL_EPOCH = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class StateWrite:
    """A write-back done: the rows upserted and the ``state_write`` control queued."""

    control_id: uuid.UUID
    rows_written: int
    source_table: str
    cloud_version: int  # the lineage's new cloud_version, carried by every row


def _param(value: Any, pg_type: str, field: str) -> str | None:
    """A value as text for ``CAST($n AS text)::pg_type``; PostgreSQL does the checking."""
    if value is None:
        return None
    if pg_type == "bytea":
        if isinstance(value, dict) and isinstance(value.get("$blob"), str):
            return "\\x" + str(value["$blob"])
        if isinstance(value, str):
            return "\\x" + value.encode().hex()
        raise InvalidRequestError(field, 'bytea values are {"$blob": "<hex>"} or strings')
    if pg_type == "jsonb":
        return orjson.dumps(value).decode()
    if isinstance(value, dict | list):
        raise InvalidRequestError(field, f"an object or list cannot be written as {pg_type}")
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _check_rows(rows: Any, pk_names: set[str], writable: dict[str, MirrorColumn]
                ) -> list[dict[str, Any]]:
    if not isinstance(rows, list) or not 1 <= len(rows) <= MAX_WRITE_ROWS:
        raise InvalidRequestError("rows", f"must be a list of 1 to {MAX_WRITE_ROWS} rows")
    for i, row in enumerate(rows):
        pk, values = (row.get("pk"), row.get("values")) if isinstance(row, dict) else (None, None)
        if not isinstance(pk, dict) or set(pk) != pk_names:
            raise InvalidRequestError(f"rows[{i}].pk",
                                      f"must name exactly the primary key {sorted(pk_names)}")
        if not isinstance(values, dict) or not values:
            raise InvalidRequestError(f"rows[{i}].values", "must be a non-empty object")
        row["values"] = _source_names(values, writable, f"rows[{i}].values")
    return rows


def _source_names(values: dict[str, Any], writable: dict[str, MirrorColumn], field: str
                  ) -> dict[str, Any]:
    """``values`` keyed by source column: a column may be named by its source name or by
    its (renamed) mirror name; the device only knows the source names."""
    by_target = {c.target: c.source for c in writable.values()}
    out: dict[str, Any] = {}
    for name, value in values.items():
        source = name if name in writable else by_target.get(name)
        if source is None:
            raise InvalidRequestError(field, f"column {name!r} is not mirrored in this table; "
                                      "name a column by its source or mirror name: "
                                      + ", ".join(f"{c.source} (mirror {c.target})"
                                                  if c.target != c.source else c.source
                                                  for c in sorted(writable.values(),
                                                                  key=lambda c: c.source)))
        if source in out:
            raise InvalidRequestError(field, f"column {source!r} is named twice (by its "
                                             "source and its mirror name)")
        out[source] = value
    return out


async def write_state_rows(conn: Conn, *, project_id: uuid.UUID, device_id: uuid.UUID,
                           lineage_id: uuid.UUID, rows: Any) -> StateWrite:
    """Upsert cloud state and queue the ``state_write`` control, in one transaction."""
    async with conn.transaction():
        lineage = await get_lineage_for_update(conn, lineage_id)
        if lineage is None or lineage.project_id != project_id or \
                lineage.device_id != device_id:
            raise NotFoundError(f"state table {lineage_id} not found for this device")
        info = await conn.fetchrow(
            "SELECT l.sync_authority, v.schema_columns FROM edge_table_lineages l "
            "LEFT JOIN edge_schema_versions v ON v.lineage_id = l.id "
            "AND v.schema_hash = l.approved_schema_hash WHERE l.id = $1", lineage_id)
        assert info is not None
        if lineage.pipeline != Pipeline.ROWS:
            raise StateWriteError(ApiErrorCode.STATE_NOT_CLOUD_AUTHORITATIVE,
                                  f"lineage {lineage_id} is a telemetry lineage")
        # Not approved yet comes first (the reference's order): its authority is only
        # chosen at approval, so "device-authoritative" would send the operator astray.
        target = None
        if lineage.approved_schema_hash:
            target = await load_state_target(conn, lineage, lineage.approved_schema_hash)
        if target is None or not info["schema_columns"]:
            raise StateWriteError(ApiErrorCode.STATE_MIRROR_NOT_PROVISIONED,
                                  "approve the schema review before writing back")
        if info["sync_authority"] != SyncAuthority.CLOUD:
            raise StateWriteError(ApiErrorCode.STATE_NOT_CLOUD_AUTHORITATIVE,
                                  f"lineage {lineage_id} is device-authoritative")
        pk_names = {str(c["name"]) for c in info["schema_columns"]["columns"]
                    if c["pk_ordinal"]}
        by_source = {c.source: c for c in target.columns}
        rows = _check_rows(rows, pk_names, by_source)
        version = await bump_cloud_version(conn, lineage_id)
        await target.provision_cloud_authority(conn)
        for i, row in enumerate(rows):
            await _upsert(conn, target.table, device_id, i, row, by_source, version)
        control_id = await enqueue_control(
            conn, device_id=device_id, lineage_id=lineage_id, kind=ControlKind.STATE_WRITE,
            body={"source_table": lineage.source_table,
                  "rows": [{"pk": r["pk"], "values": r["values"], "cloud_version": version}
                           for r in rows]})
    return StateWrite(control_id, len(rows), lineage.source_table, version)


async def _upsert(conn: Conn, table: str, device_id: uuid.UUID, index: int,
                  row: dict[str, Any], by_source: dict[str, MirrorColumn], version: int) -> None:
    merged = {**row["values"], **row["pk"]}
    cols = [by_source[name] for name in merged if name in by_source]
    values = [(col.target, col.pg_type,
               _param(merged[col.source], col.pg_type, f"rows[{index}].values.{col.source}"))
              for col in cols]
    try:
        async with conn.transaction():
            await upsert_cloud_row(conn, table, device_id,
                                   _core.pk_hash(orjson.dumps(row["pk"])), _NIL_EPOCH, version,
                                   values)
    except (asyncpg.DataError, asyncpg.IntegrityConstraintViolationError) as exc:
        raise InvalidRequestError(f"rows[{index}]", f"cannot be written: {exc}") from exc


async def resend_cloud_rows(conn: Conn, lineage_id: uuid.UUID, device_id: uuid.UUID,
                            pk_hashes: list[str]) -> uuid.UUID | None:
    """Send the device the cloud's current version of rows whose device-side change
    lost against a newer cloud write, so the device converges on the cloud's state."""
    if not pk_hashes:
        return None
    info = await conn.fetchrow(
        "SELECT l.source_table, l.target_table, l.approved_schema_hash, v.schema_columns "
        "FROM edge_table_lineages l JOIN edge_schema_versions v ON v.lineage_id = l.id "
        "AND v.schema_hash = l.approved_schema_hash WHERE l.id = $1", lineage_id)
    if info is None or not info["schema_columns"]:
        return None
    bindings = await conn.fetch(
        "SELECT source_column_name, mirror_column_name FROM edge_column_bindings "
        "WHERE lineage_id = $1 AND schema_hash = $2 AND action = 'mirror'",
        lineage_id, info["approved_schema_hash"])
    mirror = {b["source_column_name"]: b["mirror_column_name"] for b in bindings}
    pk_names = [str(c["name"]) for c in info["schema_columns"]["columns"] if c["pk_ordinal"]]
    if not all(name in mirror for name in pk_names):
        return None  # the key is not mirrored: the cloud cannot name the rows to the device
    rows = await conn.fetch(
        f"SELECT * FROM {quote_ident(info['target_table'])} "
        "WHERE device_id = $1 AND _edge_pk_hash = ANY($2::text[]) AND NOT _edge_deleted",
        device_id, pk_hashes)
    payload = []
    for r in rows:
        values = {src: _wire(r[dst]) for src, dst in mirror.items() if src not in pk_names}
        payload.append({"pk": {k: _wire(r[mirror[k]]) for k in pk_names}, "values": values,
                        "cloud_version": r["_edge_cloud_version"]})
    if not payload:
        return None
    return await enqueue_control(conn, device_id=device_id, lineage_id=lineage_id,
                                 kind=ControlKind.STATE_WRITE,
                                 body={"source_table": info["source_table"], "rows": payload})


def _wire(value: Any) -> Any:
    """A PostgreSQL value as the device expects it in JSON."""
    if isinstance(value, bytes | bytearray | memoryview):
        return {"$blob": bytes(value).hex().upper()}
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return str(value)
