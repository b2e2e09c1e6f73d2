"""``/fleets``: the project's fleets, listed (a fleet is made by registering a device
with a new fleet name; the registry scopes live under ``/fleets/{fleet_id}/edge``)."""

from __future__ import annotations

import uuid
from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel, Field

from edgesync.api._auth import CanRead
from edgesync.api._db import Db
from edgesync.api._envelopes import Page
from edgesync.api._errors import error_responses
from edgesync.api._pagination import Paging

__all__ = ["router"]

router = APIRouter(prefix="/core/api/v1/projects/{project_id}/fleets", tags=["fleets"])


class FleetOut(BaseModel):
    id: uuid.UUID
    name: str
    device_count: int = Field(description="devices in the fleet, revoked ones included")
    created_at: datetime


@router.get("", response_model=Page[FleetOut], responses=error_responses(400, 401, 404, 422),
            summary="List the project's fleets")
async def list_fleets(access: CanRead, conn: Db, paging: Paging) -> Page[FleetOut]:
    total = await conn.fetchval("SELECT count(*) FROM edge_fleets WHERE project_id = $1",
                                access.project_id)
    rows = await conn.fetch(
        "SELECT f.id, f.name, f.created_at, (SELECT count(*) FROM edge_devices d "
        "WHERE d.fleet_id = f.id) AS device_count FROM edge_fleets f WHERE f.project_id = $1 "
        "ORDER BY f.name OFFSET $2 LIMIT $3", access.project_id, paging.offset, paging.limit)
    return paging.of([FleetOut.model_validate(dict(r)) for r in rows], int(total))
