"""``/edge/observations``: schemas devices observed (``sync/schema/observe``), with
whether each table ever sent a batch (a lineage exists) — so a table a device sees but
never sends (not configured, excluded, its agent stuck) is visible."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from edgesync.api._auth import CanRead
from edgesync.api._db import Db
from edgesync.api._envelopes import Page
from edgesync.api._errors import error_responses
from edgesync.api._pagination import Paging

__all__ = ["router"]

router = APIRouter(prefix="/core/api/v1/projects/{project_id}/edge/observations",
                   tags=["observations"])


class ObservationOut(BaseModel):
    device_id: uuid.UUID
    device_name: str
    source_table: str
    schema_hash: str
    observed_at: datetime | None = Field(description="when the device observed it (its clock)")
    received_at: datetime
    lineage_id: uuid.UUID | None = Field(
        description="the (device, table) lineage; null: the table never sent a batch")
    sent: bool = Field(description="a batch of this table reached the cloud (lineage exists)")
    schema_version_known: bool = Field(
        description="a batch carried this very schema (its lineage has the version)")


_FROM = """
FROM edge_schema_observations o
JOIN edge_devices d ON d.id = o.device_id
LEFT JOIN edge_table_lineages l ON l.device_id = o.device_id AND l.source_table = o.source_table
WHERE d.project_id = $1 AND ($2::uuid IS NULL OR o.device_id = $2)
  AND ($3::boolean IS NULL OR (l.id IS NULL) = $3)
"""


@router.get("", response_model=Page[ObservationOut],
            responses=error_responses(400, 401, 404, 422),
            summary="Schemas devices observed; with unsent=true the tables that never sent")
async def list_observations(
    access: CanRead, conn: Db, paging: Paging,
    device_id: Annotated[uuid.UUID | None, Query()] = None,
    unsent: Annotated[bool | None, Query(
        description="true: only tables with no batch yet (no lineage); false: only the "
                    "others")] = None,
) -> Page[ObservationOut]:
    args = (access.project_id, device_id, unsent)
    total = await conn.fetchval("SELECT count(*)" + _FROM, *args)
    rows = await conn.fetch(
        "SELECT o.device_id, d.name AS device_name, o.source_table, o.schema_hash, "
        "o.observed_at, o.received_at, l.id AS lineage_id, l.id IS NOT NULL AS sent, "
        "EXISTS (SELECT 1 FROM edge_schema_versions v WHERE v.lineage_id = l.id "
        "AND v.schema_hash = o.schema_hash) AS schema_version_known"
        + _FROM + "ORDER BY d.name, o.source_table, o.received_at OFFSET $4 LIMIT $5",
        *args, paging.offset, paging.limit)
    return paging.of([ObservationOut.model_validate(dict(r)) for r in rows], int(total))
