"""Column actions ``map`` and ``auto_create_and_map``: which data point a column feeds.

``map`` names a data point of the lineage's own project (another project's is refused
as if it did not exist). ``auto_create_and_map`` needs project policy
``allow_auto_create_device_data_points = true`` and creates — or reuses, when one of
the same name and value type exists — a data point named ``data_point_name`` or the
column. Values are checked against the data point's type (``DATA_POINT_TYPES``).
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from edgesync.errors import ConflictError, InvalidRequestError
from edgesync.fleet import ProjectPolicy
from edgesync.governance._column_actions import ColumnAction, ColumnActionKind
from edgesync.governance._data_points import ensure_data_point
from edgesync.materialize import DATA_POINT_TYPES, pg_type_for
from edgesync.store import Conn

__all__ = ["resolve_mapped", "value_type_for"]

_BY_PG_TYPE = {pg: vt for vt, pg in DATA_POINT_TYPES.items()}


def value_type_for(pg_type: str) -> str:
    return _BY_PG_TYPE.get(pg_type, "text")


async def _policy_allows_auto_create(conn: Conn, project_id: uuid.UUID) -> bool:
    policy = await conn.fetchval("SELECT policy FROM edge_projects WHERE id = $1", project_id)
    return ProjectPolicy.from_stored(policy).allow_auto_create_device_data_points


async def _auto_create(conn: Conn, project_id: uuid.UUID, name: str, value_type: str,
                       where: str) -> uuid.UUID:
    await ensure_data_point(conn, project_id, name, value_type)
    row = await conn.fetchrow(
        "SELECT id, value_type FROM edge_device_data_points WHERE project_id = $1 AND name = $2",
        project_id, name)
    assert row is not None
    if row["value_type"] != value_type:
        raise ConflictError(
            f"{where}: data point {name!r} exists with value type {row['value_type']}, "
            f"not {value_type}; map to it explicitly or choose another data_point_name")
    dp: uuid.UUID = row["id"]
    return dp


async def resolve_mapped(conn: Conn, project_id: uuid.UUID, columns: list[dict[str, Any]],
                         actions: list[ColumnAction]) -> list[ColumnAction]:
    """The actions with every mapped column's data point id and value pg type filled in
    (``target_type``); raises InvalidRequestError / ConflictError when one cannot be."""
    affinity = {str(c["name"]): str(c["decl_type_affinity"]) for c in columns}
    out: list[ColumnAction] = []
    allowed: bool | None = None
    for i, act in enumerate(actions):
        where = f"column_actions[{i}]"
        if act.action == ColumnActionKind.MAP or (act.action == ColumnActionKind.AUTO_CREATE_AND_MAP
                                   and act.device_data_point_id is not None):
            vt = await conn.fetchval(
                "SELECT value_type FROM edge_device_data_points WHERE id = $1 AND project_id = $2",
                act.device_data_point_id, project_id)
            if vt is None:
                raise InvalidRequestError(f"{where}.device_data_point_id",
                                          f"no data point {act.device_data_point_id} "
                                          "in this project")
            out.append(dataclasses.replace(act, target_type=DATA_POINT_TYPES[vt]))
        elif act.action == ColumnActionKind.AUTO_CREATE_AND_MAP:
            if allowed is None:
                allowed = await _policy_allows_auto_create(conn, project_id)
            if not allowed:
                raise InvalidRequestError(
                    f"{where}.action", "auto_create_and_map needs project policy "
                    "allow_auto_create_device_data_points = true")
            pg_type = act.target_type or pg_type_for(affinity[act.source_column_name])
            vt = value_type_for(pg_type)
            dp = await _auto_create(conn, project_id,
                                    act.data_point_name or act.source_column_name, vt, where)
            out.append(dataclasses.replace(act, device_data_point_id=dp,
                                           target_type=DATA_POINT_TYPES[vt]))
        else:
            out.append(act)
    return out
