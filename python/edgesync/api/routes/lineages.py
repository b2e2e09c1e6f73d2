"""``/edge/lineages``: list, detail, staged rows, mirror rows, reset, discard staged rows,
delete."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response

from edgesync import governance, operations, staging
from edgesync.api._auth import CanManage, CanRead
from edgesync.api._db import Db
from edgesync.api._domain import model_of
from edgesync.api._envelopes import Item, Page
from edgesync.api._errors import error_responses
from edgesync.api._idempotency import IdempotencyKey, idempotent
from edgesync.api._lineage_models import (
    DeletedLineage,
    DiscardBody,
    DiscardResult,
    LineageDetail,
    LineageOut,
    ResetResult,
    StagedRow,
)
from edgesync.api._lineage_queries import (
    deleted_out,
    get_lineage,
    lineage_detail,
    lineage_not_found,
    list_lineages,
    mirror_rows,
)
from edgesync.api._pagination import Pagination, Paging
from edgesync.api._review_models import ReviewOut
from edgesync.api._review_queries import review_out
from edgesync.api._search import MAX_SEARCH, SearchText
from edgesync.api._telemetry_queries import MAX_TELEMETRY_LIMIT, TelemetryQuery, telemetry_rows
from edgesync.errors import NotFoundError
from edgesync.store import Conn

__all__ = ["router"]

router = APIRouter(prefix="/core/api/v1/projects/{project_id}/edge/lineages",
                   tags=["lineages"])
LineageId = Annotated[uuid.UUID, Path(description="lineage UUID")]
_READ_ERRORS = error_responses(400, 401, 404, 422)
_WRITE_ERRORS = error_responses(400, 401, 403, 404, 409, 422)


@router.get("", response_model=Page[LineageOut], responses=_READ_ERRORS,
            summary="List lineages")
async def list_(
    access: CanRead, conn: Db, paging: Paging,
    device_id: Annotated[uuid.UUID | None, Query()] = None,
    fleet_id: Annotated[uuid.UUID | None, Query()] = None,
    status: Annotated[governance.LineageStatus | None, Query()] = None,
    q: Annotated[SearchText, Query(
        max_length=MAX_SEARCH,
        description="only lineages whose device name, source table, target "
                    "table or pause reason contains this (any case)")] = None,
) -> Page[LineageOut]:
    items, total = await list_lineages(conn, access.project_id, device_id=device_id,
                                       fleet_id=fleet_id, status=status,
                                       offset=paging.offset, limit=paging.limit, q=q)
    return paging.of(items, total)


@router.get("/{lineage_id}", response_model=Item[LineageDetail], responses=_READ_ERRORS,
            summary="Lineage detail: schema versions, bindings, replay, materialization")
async def detail(access: CanRead, conn: Db, lineage_id: LineageId) -> Item[LineageDetail]:
    return Item[LineageDetail](data=await lineage_detail(conn, access.project_id, lineage_id))


@router.get("/{lineage_id}/staged-rows", response_model=Page[StagedRow],
            responses=_READ_ERRORS, summary="Row operations waiting in staging, oldest first")
async def staged_rows(access: CanRead, conn: Db, paging: Paging,
                      lineage_id: LineageId) -> Page[StagedRow]:
    await get_lineage(conn, access.project_id, lineage_id)
    total = await conn.fetchval(
        "SELECT coalesce(sum(row_count), 0) FROM edge_staged_rows WHERE lineage_id = $1",
        lineage_id)
    rows = await staging.list_staged_rows(conn, lineage_id, offset=paging.offset,
                                          limit=paging.limit)
    # The row's own keys sit next to the envelope's (the model allows extra fields).
    return paging.of([model_of(StagedRow, r, **r.doc) for r in rows], int(total))


@router.get("/{lineage_id}/mirror-rows", response_model=Page[dict[str, Any]],
            responses=_READ_ERRORS, summary="Materialized rows of the lineage's state table")
async def mirror_rows_(access: CanRead, conn: Db, paging: Paging,
                       lineage_id: LineageId) -> Page[dict[str, Any]]:
    lineage = await get_lineage(conn, access.project_id, lineage_id)
    rows, total = await mirror_rows(conn, lineage, offset=paging.offset, limit=paging.limit)
    return paging.of(rows, total)


@router.get("/{lineage_id}/telemetry", response_model=Page[dict[str, Any]],
            responses=_READ_ERRORS,
            summary="Telemetry samples of an edge_ts_* lineage in a time range")
async def telemetry(
    access: CanRead, conn: Db, lineage_id: LineageId,
    from_: Annotated[datetime | None, Query(
        alias="from", description="samples with event_ts at or after this time (RFC 3339)")
    ] = None,
    to: Annotated[datetime | None, Query(description="samples with event_ts before this time")
                  ] = None,
    device_id: Annotated[uuid.UUID | None, Query(
        description="default: the lineage's device; another device of the project only "
                    "when its lineage writes to the same (shared) target")] = None,
    columns: Annotated[str | None, Query(
        max_length=10_000, description="comma-separated data columns (default: all); "
                                       "device_id, event_ts and row_id always come back")
    ] = None,
    page: Annotated[int, Query(ge=1, le=1_000_000, description="1-based page number")] = 1,
    limit: Annotated[int, Query(ge=1, le=MAX_TELEMETRY_LIMIT,
                                description="samples per page")] = 1000,
) -> Page[dict[str, Any]]:
    lineage = await get_lineage(conn, access.project_id, lineage_id)
    paging = Pagination(page, limit)
    query = TelemetryQuery(start=from_, end=to, device_id=device_id, columns=columns,
                           offset=paging.offset, limit=limit)
    rows, total = await telemetry_rows(conn, lineage, query)
    return paging.of(rows, total)


@router.post("/{lineage_id}/reset-materialization", response_model=Item[ResetResult],
             responses=_WRITE_ERRORS,
             summary="Clear materialization errors, requeue failed rows, replay, resume")
async def reset(access: CanManage, conn: Db, request: Request, lineage_id: LineageId,
                idempotency_key: IdempotencyKey = None) -> Response:
    async def work(tx: Conn) -> tuple[int, Item[ResetResult]]:
        await get_lineage(tx, access.project_id, lineage_id)
        reset = await operations.reset_materialization(tx, lineage_id)
        return 200, Item[ResetResult](data=ResetResult(
            lineage_id=reset.lineage_id, requeued_batches=reset.requeued_batches,
            quarantined_rows=reset.quarantined_rows))

    return await idempotent(conn, access, request, idempotency_key, work)


@router.post("/{lineage_id}/discard-staged", response_model=Item[DiscardResult],
             responses=_WRITE_ERRORS,
             summary="Discard staged batches: all, or by staging reason and/or schema version")
async def discard_staged(access: CanManage, conn: Db, request: Request, lineage_id: LineageId,
                         body: DiscardBody, idempotency_key: IdempotencyKey = None) -> Response:
    async def work(tx: Conn) -> tuple[int, Item[DiscardResult]]:
        await get_lineage(tx, access.project_id, lineage_id)
        batches, rows = await operations.discard_staged(
            tx, access.project_id, lineage_id, actor=access.actor,
            reason=body.staging_reason, schema_hash=body.schema_hash)
        return 200, Item[DiscardResult](data=DiscardResult(
            lineage_id=lineage_id, discarded_batches=batches, discarded_rows=rows))

    return await idempotent(conn, access, request, idempotency_key, work)


@router.post("/{lineage_id}/reopen-review", status_code=201, response_model=Item[ReviewOut],
             responses=_WRITE_ERRORS,
             summary="Open a new review of the approved schema of a lineage paused by "
                     "deferred columns")
async def reopen_review(access: CanManage, conn: Db, request: Request, lineage_id: LineageId,
                        idempotency_key: IdempotencyKey = None) -> Response:
    async def work(tx: Conn) -> tuple[int, Item[ReviewOut]]:
        await get_lineage(tx, access.project_id, lineage_id)
        review = await operations.reopen_review(tx, lineage_id, actor=access.actor)
        return 201, Item[ReviewOut](data=review_out(review))

    return await idempotent(conn, access, request, idempotency_key, work)


@router.delete("/{lineage_id}", response_model=Item[DeletedLineage], responses=_WRITE_ERRORS,
               summary="Remove the cloud sync state of this device table")
async def delete(access: CanManage, conn: Db, request: Request, lineage_id: LineageId,
                 idempotency_key: IdempotencyKey = None) -> Response:
    async def work(tx: Conn) -> tuple[int, Item[DeletedLineage]]:
        await get_lineage(tx, access.project_id, lineage_id)
        try:
            deleted = await operations.delete_lineage(tx, lineage_id)
        except NotFoundError as exc:
            raise lineage_not_found() from exc
        return 200, Item[DeletedLineage](data=deleted_out(deleted))

    return await idempotent(conn, access, request, idempotency_key, work)
