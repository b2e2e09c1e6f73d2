"""``/edge/data-points``: the project's device data points and the values devices report
through columns approved with ``map`` / ``auto_create_and_map``."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response

from edgesync import governance
from edgesync.api._auth import CanManage, CanRead
from edgesync.api._db import Db
from edgesync.api._domain import model_of
from edgesync.api._envelopes import Item, Page
from edgesync.api._errors import ApiError, error_responses
from edgesync.api._idempotency import IdempotencyKey, idempotent
from edgesync.api._pagination import Pagination, Paging
from edgesync.api._registry_models import DataPointIn, DataPointOut, DataPointValueOut
from edgesync.api._values import json_value
from edgesync.errors import ApiErrorCode, ConflictError, NotFoundError
from edgesync.store import Conn

__all__ = ["MAX_VALUES", "router"]

router = APIRouter(prefix="/core/api/v1/projects/{project_id}/edge/data-points",
                   tags=["data points"])
DataPointId = Annotated[uuid.UUID, Path(description="data point UUID")]
MAX_VALUES = 10_000
_READ_ERRORS = error_responses(400, 401, 404, 422)


def data_point_not_found() -> ApiError:
    return ApiError(404, ApiErrorCode.DATA_POINT_NOT_FOUND, "data point not found")


async def _get(conn: Conn, project_id: uuid.UUID, data_point_id: uuid.UUID) -> DataPointOut:
    try:
        point = await governance.get_data_point(conn, project_id, data_point_id)
    except NotFoundError:
        raise data_point_not_found() from None
    return model_of(DataPointOut, point)


@router.get("", response_model=Page[DataPointOut], responses=_READ_ERRORS,
            summary="List the project's data points (by name)")
async def list_(access: CanRead, conn: Db, paging: Paging) -> Page[DataPointOut]:
    items = await governance.list_data_points(conn, access.project_id)
    page = items[paging.offset:paging.offset + paging.limit]
    return paging.of([model_of(DataPointOut, d) for d in page], len(items))


@router.post("", status_code=201, response_model=Item[DataPointOut],
             responses=error_responses(400, 401, 403, 404, 409, 422),
             summary="Create a data point (name unique per project)")
async def create(access: CanManage, conn: Db, request: Request, body: DataPointIn,
                 idempotency_key: IdempotencyKey = None) -> Response:
    async def work(tx: Conn) -> tuple[int, Item[DataPointOut]]:
        try:
            point = await governance.create_data_point(
                tx, access.project_id, name=body.name, value_type=body.value_type,
                unit=body.unit)
        except ConflictError as exc:
            raise ApiError(409, ApiErrorCode.DATA_POINT_NAME_ALREADY_IN_USE, str(exc),
                           "name") from exc
        return 201, Item[DataPointOut](data=model_of(DataPointOut, point))

    return await idempotent(conn, access, request, idempotency_key, work)


@router.get("/{data_point_id}", response_model=Item[DataPointOut], responses=_READ_ERRORS,
            summary="Data point detail")
async def detail(access: CanRead, conn: Db, data_point_id: DataPointId) -> Item[DataPointOut]:
    return Item[DataPointOut](data=await _get(conn, access.project_id, data_point_id))


def _utc(t: datetime | None) -> datetime | None:
    return t.replace(tzinfo=UTC) if t is not None and t.tzinfo is None else t


@router.get("/{data_point_id}/values", response_model=Page[DataPointValueOut],
            responses=_READ_ERRORS,
            summary="Values of a data point in a time range, oldest first")
async def values(
    access: CanRead, conn: Db, data_point_id: DataPointId,
    device_id: Annotated[uuid.UUID | None, Query(description="only this device's values")
                         ] = None,
    from_: Annotated[datetime | None, Query(
        alias="from", description="values with ts at or after this time (RFC 3339)")] = None,
    to: Annotated[datetime | None, Query(description="values with ts before this time")
                  ] = None,
    page: Annotated[int, Query(ge=1, le=MAX_VALUES, description="1-based page number")] = 1,
    limit: Annotated[int, Query(ge=1, le=MAX_VALUES, description="values per page")] = 100,
) -> Page[DataPointValueOut]:
    since, until = _utc(from_), _utc(to)
    if since is not None and until is not None and since >= until:
        raise ApiError(422, ApiErrorCode.INVALID_REQUEST, "must be later than from", "to")
    paging = Pagination(page, limit)
    if paging.offset + limit > MAX_VALUES:
        raise ApiError(422, ApiErrorCode.INVALID_REQUEST,
                       f"page * limit may not exceed {MAX_VALUES}: narrow from/to instead", "page")
    await _get(conn, access.project_id, data_point_id)
    total = await conn.fetchval(
        "SELECT count(*) FROM edge_data_point_values WHERE data_point_id = $1 "
        "AND ($2::uuid IS NULL OR device_id = $2) "
        "AND ($3::timestamptz IS NULL OR ts >= $3) AND ($4::timestamptz IS NULL OR ts < $4)",
        data_point_id, device_id, since, until)
    found = await governance.read_data_point_values(
        conn, access.project_id, data_point_id, device_id=device_id, since=since, until=until,
        limit=paging.offset + limit)
    items = [model_of(DataPointValueOut, v, value=json_value(v.value))
             for v in found[paging.offset:]]
    return paging.of(items, int(total))
