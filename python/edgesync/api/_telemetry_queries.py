"""Reads of ``edge_ts_*`` telemetry targets: one device's samples in a time range.

A telemetry target is shared by every device of the project that sends the same table,
so every read is filtered by device: the lineage's own device, or another device of the
project whose lineage writes to the same target.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from edgesync.api._errors import ApiError
from edgesync.api._lineage_models import LineageOut
from edgesync.api._values import json_value
from edgesync.errors import ApiErrorCode
from edgesync.materialize import TS_PLATFORM_COLUMNS, quote_ident
from edgesync.protocol import Pipeline
from edgesync.store import Conn

__all__ = ["MAX_TELEMETRY_LIMIT", "TelemetryQuery", "telemetry_rows"]

MAX_TELEMETRY_LIMIT = 10_000


class TelemetryQuery:
    def __init__(self, *, start: datetime | None, end: datetime | None,
                 device_id: uuid.UUID | None, columns: str | None, offset: int,
                 limit: int) -> None:
        self.start = _utc(start)
        self.end = _utc(end)
        self.device_id = device_id
        self.columns = None if columns is None else [c.strip() for c in columns.split(",")]
        self.offset = offset
        self.limit = limit


def _utc(t: datetime | None) -> datetime | None:
    return t.replace(tzinfo=UTC) if t is not None and t.tzinfo is None else t


def _invalid(field: str, message: str) -> ApiError:
    return ApiError(422, ApiErrorCode.INVALID_REQUEST, message, field)


async def _target_columns(conn: Conn, table: str) -> list[str]:
    rows = await conn.fetch(
        "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(quote_ident($1)) "
        "AND attnum > 0 AND NOT attisdropped ORDER BY attnum", table)
    return [str(r["attname"]) for r in rows]


async def _device(conn: Conn, lineage: LineageOut, asked: uuid.UUID | None) -> uuid.UUID:
    if asked is None or asked == lineage.device_id:
        return lineage.device_id
    shares = await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM edge_table_lineages WHERE project_id = $1 "
        "AND device_id = $2 AND target_table = $3)",
        lineage.project_id, asked, lineage.target_table)
    if not shares:
        raise _invalid("device_id", "this device of the project writes no rows to the "
                                    "lineage's telemetry target")
    return asked


async def telemetry_rows(conn: Conn, lineage: LineageOut, q: TelemetryQuery
                         ) -> tuple[list[dict[str, Any]], int]:
    """Samples ordered by ``event_ts`` (then ``row_id``); ``from`` inclusive, ``to``
    exclusive; the platform columns always, the data columns named (default: all)."""
    table = lineage.target_table
    existing = await _target_columns(conn, table) if (
        table is not None and lineage.pipeline == Pipeline.TELEMETRY) else []
    if not existing:
        raise ApiError(404, ApiErrorCode.TELEMETRY_NOT_PROVISIONED,
                       "this lineage has no telemetry table: it is a state-table lineage, "
                       "or its schema review is not approved yet")
    assert table is not None
    data_cols = [c for c in existing if c not in TS_PLATFORM_COLUMNS]
    if q.columns is None:
        chosen = data_cols
    else:
        unknown = [c for c in q.columns if c not in data_cols]
        if unknown or not q.columns:
            raise _invalid("columns", f"unknown column(s) {unknown}; this target has "
                                      f"{data_cols}")
        chosen = list(dict.fromkeys(q.columns))
    if q.start is not None and q.end is not None and q.start >= q.end:
        raise _invalid("to", "must be later than from")
    device_id = await _device(conn, lineage, q.device_id)
    where = ("WHERE device_id = $1 AND ($2::timestamptz IS NULL OR event_ts >= $2) "
             "AND ($3::timestamptz IS NULL OR event_ts < $3)")
    args = (device_id, q.start, q.end)
    qt = quote_ident(table)
    total = await conn.fetchval(f"SELECT count(*) FROM {qt} {where}", *args)
    select = ", ".join(quote_ident(c) for c in (*TS_PLATFORM_COLUMNS, *chosen))
    rows = await conn.fetch(f"SELECT {select} FROM {qt} {where} ORDER BY event_ts, row_id "
                            "OFFSET $4 LIMIT $5", *args, q.offset, q.limit)
    return [{k: json_value(v) for k, v in r.items()} for r in rows], int(total)
