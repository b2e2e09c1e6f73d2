"""``/devices/{device_id}/edge/state-tables/{lineage_id}/rows``: cloud write-back into a
``cloud_authoritative`` state table (rows upserted, ``state_write`` sent to the device)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from edgesync import control
from edgesync.api._auth import CanManage
from edgesync.api._db import Db
from edgesync.api._domain import model_of
from edgesync.api._envelopes import Item
from edgesync.api._errors import ApiError, error_responses
from edgesync.api._idempotency import IdempotencyKey, idempotent
from edgesync.api._lineage_queries import lineage_not_found
from edgesync.errors import ApiErrorCode
from edgesync.store import Conn

__all__ = ["StateRowIn", "StateWriteBody", "StateWriteResult", "router"]

router = APIRouter(
    prefix="/core/api/v1/projects/{project_id}/devices/{device_id}/edge/state-tables",
    tags=["state write-back"])
DeviceId = Annotated[uuid.UUID, Path(description="device UUID")]
LineageId = Annotated[uuid.UUID, Path(description="lineage UUID of the state table")]


class StateRowIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pk: dict[str, Any] = Field(description="every primary-key column of the source table")
    values: dict[str, Any] = Field(
        description="source column → value (mirrored columns only); BLOBs as "
                    '{"$blob": "<hex>"}')


class StateWriteBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rows: list[StateRowIn] = Field(min_length=1, max_length=control.MAX_WRITE_ROWS)


class StateWriteResult(BaseModel):
    control_id: uuid.UUID = Field(description="the state_write control queued for the device")
    rows_written: int
    source_table: str
    cloud_version: int = Field(description="the lineage's new cloud_version, carried by "
                                           "every row of this write")


def device_not_found() -> ApiError:
    return ApiError(404, ApiErrorCode.DEVICE_NOT_FOUND, "device not found")


@router.post("/{lineage_id}/rows", response_model=Item[StateWriteResult],
             responses=error_responses(400, 401, 403, 404, 409, 422),
             summary="Write rows into a cloud-authoritative state table and send them to "
                     "the device")
async def write_rows(access: CanManage, conn: Db, request: Request, device_id: DeviceId,
                     lineage_id: LineageId, body: StateWriteBody,
                     idempotency_key: IdempotencyKey = None) -> Response:
    rows = [r.model_dump() for r in body.rows]

    async def work(tx: Conn) -> tuple[int, Item[StateWriteResult]]:
        found = await tx.fetchrow(
            "SELECT d.id AS device, l.device_id AS owner FROM edge_devices d "
            "LEFT JOIN edge_table_lineages l ON l.id = $3 AND l.project_id = d.project_id "
            "WHERE d.id = $1 AND d.project_id = $2", device_id, access.project_id, lineage_id)
        if found is None:
            raise device_not_found()
        if found["owner"] != device_id:
            raise lineage_not_found()
        result = await control.write_state_rows(tx, project_id=access.project_id,
                                                device_id=device_id, lineage_id=lineage_id,
                                                rows=rows)
        return 200, Item[StateWriteResult](data=model_of(StateWriteResult, result))

    return await idempotent(conn, access, request, idempotency_key, work)
