"""Device data points: a project's named, typed values, and the values devices reported.

Values arrive through columns approved with ``map`` / ``auto_create_and_map`` (see
``edgesync.materialize._data_points`` for how and when they are written).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from edgesync.errors import ConflictError, InvalidRequestError, NotFoundError
from edgesync.materialize import DATA_POINT_TYPES
from edgesync.store import Conn, from_record

__all__ = [
    "DataPoint",
    "DataPointValue",
    "create_data_point",
    "ensure_data_point",
    "get_data_point",
    "list_data_points",
    "read_data_point_values",
]

_MAX_LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class DataPoint:
    """A project's named, typed value (``value_type``: a key of ``DATA_POINT_TYPES``)."""

    id: uuid.UUID
    project_id: uuid.UUID
    name: str
    value_type: str
    unit: str | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class DataPointValue:
    """One value a device reported for a data point."""

    device_id: uuid.UUID
    ts: datetime  # telemetry: the row's event_ts; state: when the cloud applied the change
    # The JSON value as stored (None for a NULL): its type is the data point's value_type.
    value: Any
    source_key: str
    source_version: str


async def create_data_point(conn: Conn, project_id: uuid.UUID, *, name: str, value_type: str,
                            unit: str | None = None) -> DataPoint:
    if not isinstance(name, str) or not 1 <= len(name) <= 200:
        raise InvalidRequestError("name", "a string of 1 to 200 characters")
    if value_type not in DATA_POINT_TYPES:
        raise InvalidRequestError("value_type",
                                  f"must be one of {', '.join(sorted(DATA_POINT_TYPES))}")
    try:
        row = await conn.fetchrow(
            "INSERT INTO edge_device_data_points (id, project_id, name, value_type, unit) "
            "VALUES ($1, $2, $3, $4, $5) RETURNING *",
            uuid.uuid4(), project_id, name, value_type, unit)
    except asyncpg.UniqueViolationError as exc:
        raise ConflictError(f"data point {name!r} already exists in this project") from exc
    except asyncpg.ForeignKeyViolationError as exc:
        raise NotFoundError(f"project {project_id} not found") from exc
    assert row is not None
    return from_record(DataPoint, row)


async def list_data_points(conn: Conn, project_id: uuid.UUID) -> list[DataPoint]:
    rows = await conn.fetch(
        "SELECT * FROM edge_device_data_points WHERE project_id = $1 ORDER BY name", project_id)
    return [from_record(DataPoint, r) for r in rows]


async def get_data_point(conn: Conn, project_id: uuid.UUID,
                         data_point_id: uuid.UUID) -> DataPoint:
    row = await conn.fetchrow(
        "SELECT * FROM edge_device_data_points WHERE id = $1 AND project_id = $2",
        data_point_id, project_id)
    if row is None:
        raise NotFoundError(f"data point {data_point_id} not found")
    return from_record(DataPoint, row)


async def read_data_point_values(conn: Conn, project_id: uuid.UUID, data_point_id: uuid.UUID,
                                 *, device_id: uuid.UUID | None = None,
                                 since: datetime | None = None, until: datetime | None = None,
                                 limit: int = 100) -> list[DataPointValue]:
    """Values of one data point, oldest first: ``since <= ts < until``, optionally of one
    device."""
    if not 1 <= limit <= _MAX_LIMIT:
        raise InvalidRequestError("limit", f"between 1 and {_MAX_LIMIT}")
    await get_data_point(conn, project_id, data_point_id)
    rows = await conn.fetch(
        "SELECT device_id, ts, value, source_key, source_version FROM edge_data_point_values "
        "WHERE data_point_id = $1 AND ($2::uuid IS NULL OR device_id = $2) "
        "AND ($3::timestamptz IS NULL OR ts >= $3) AND ($4::timestamptz IS NULL OR ts < $4) "
        "ORDER BY ts, device_id, source_key, source_version LIMIT $5",
        data_point_id, device_id, since, until, limit)
    return [from_record(DataPointValue, r) for r in rows]


async def ensure_data_point(conn: Conn, project_id: uuid.UUID, name: str,
                            value_type: str) -> None:
    """The project's data point ``name``, created if missing (``auto_create_and_map``);
    an existing one is left as it is (the caller checks its value type)."""
    await conn.execute(
        "INSERT INTO edge_device_data_points (id, project_id, name, value_type) "
        "VALUES ($1, $2, $3, $4) ON CONFLICT (project_id, name) DO NOTHING",
        uuid.uuid4(), project_id, name, value_type)
