"""``/edge/lineages/{id}/quarantine``: rows that could not be written — list, inspect,
edit-and-retry, retry all, discard (docs/recovery.md)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from edgesync import operations, quarantine
from edgesync.api._auth import Access, CanManage, CanRead
from edgesync.api._db import Db
from edgesync.api._envelopes import Item, Page
from edgesync.api._errors import error_responses
from edgesync.api._idempotency import IdempotencyKey, idempotent
from edgesync.api._lineage_queries import get_lineage
from edgesync.api._pagination import Paging
from edgesync.api._search import MAX_SEARCH, SearchText
from edgesync.errors import NotFoundError
from edgesync.protocol import Pipeline
from edgesync.store import Conn

__all__ = ["router"]

router = APIRouter(
    prefix="/core/api/v1/projects/{project_id}/edge/lineages/{lineage_id}/quarantine",
    tags=["quarantine"])
LineageId = Annotated[uuid.UUID, Path(description="lineage UUID")]
RowId = Annotated[int, Path(ge=1, le=2**63 - 1, description="quarantined row id")]
_READ_ERRORS = error_responses(400, 401, 404, 422)
_WRITE_ERRORS = error_responses(400, 401, 403, 404, 409, 422)
Status = Literal[quarantine.QuarantineStatus.OPEN, quarantine.QuarantineStatus.SUPERSEDED,
                 quarantine.QuarantineStatus.RETRIED]


class QuarantinedRowOut(BaseModel):
    id: int
    lineage_id: uuid.UUID
    device_id: uuid.UUID
    segment_id: int | None = Field(description="the batch's ledger row (segments)")
    pipeline: Literal[Pipeline.ROWS, Pipeline.TELEMETRY]
    source_table: str
    schema_hash: str
    batch_id: uuid.UUID
    journal_epoch: uuid.UUID | None = Field(description="state rows: the change's epoch")
    commit_seq: int | None = Field(description="state rows: the change's commit_seq")
    op: str | None = Field(description="state rows: insert, update or delete")
    pk_hash: str | None = Field(description="state rows: _edge_pk_hash of the key")
    batch_seq: int | None = Field(description="telemetry rows: the batch's batch_seq")
    event_ts: datetime | None = Field(description="telemetry rows: the sample's ts")
    row_id: uuid.UUID | None = Field(description="telemetry rows: the sample's row_id")
    row: dict[str, Any] = Field(description="the row object as sent (or as last edited): "
                                            "commit_seq/op/pk/row, or ts/row_id/fields")
    reason_code: str = Field(description="a rejection code (value_type_mismatch) or a "
                                         "PostgreSQL SQLSTATE (22003, 23502, …)")
    reason: str
    reason_field: str | None
    status: quarantine.QuarantineStatus
    attempts: int = Field(description="retries so far")
    edited_by: str | None
    resolved_by: str | None
    quarantined_at: datetime
    updated_at: datetime
    resolved_at: datetime | None


def _out(r: quarantine.QuarantinedRow) -> QuarantinedRowOut:
    fields = {k: getattr(r, k) for k in QuarantinedRowOut.model_fields if k != "row"}
    # stdlib json: integers of any size stay exact (orjson refuses past 64 bits).
    return QuarantinedRowOut(**fields, row=json.loads(r.row_json))


class RetryBody(BaseModel):
    """Retry as it is (empty body), or with some values replaced first."""

    model_config = ConfigDict(extra="forbid")

    values: dict[str, Any] | None = Field(
        None, description="new values for columns of the row's `row` object (state) or "
                          "`fields` (telemetry), as the device would send them (BLOBs as "
                          '{"$blob": "HEX"}); primary-key columns cannot change')


class RetryResult(BaseModel):
    id: int
    status: quarantine.QuarantineStatus
    written: bool
    reason_code: str | None = Field(None, description="why it was refused again")
    reason: str | None = None


class RetryAllResult(BaseModel):
    lineage_id: uuid.UUID
    retried: int = Field(description="rows written")
    failed: int = Field(description="rows refused again (still open)")
    superseded: int = Field(description="rows found overtaken by a newer change first")
    failures: list[RetryResult] = Field(description="the first refusals (up to 20)")


class DiscardedRows(BaseModel):
    lineage_id: uuid.UUID
    discarded_rows: int


@router.get("", response_model=Page[QuarantinedRowOut], responses=_READ_ERRORS,
            summary="Quarantined rows of a lineage, oldest first")
async def list_(access: CanRead, conn: Db, paging: Paging, lineage_id: LineageId,
                status: Annotated[Status | None, Query(
                    description="only rows of this status (default: all)")] = None,
                q: Annotated[SearchText, Query(
                    max_length=MAX_SEARCH,
                    description="only rows whose reason code, reason, field, "
                                "op or row as sent (key and values, as JSON "
                                "text) contains this (any case)")] = None,
                ) -> Page[QuarantinedRowOut]:
    lineage = await get_lineage(conn, access.project_id, lineage_id)
    # Rows a newer change overtook are marked so before they are shown (docs/recovery.md).
    await quarantine.sweep(conn, lineage_id,
                           lineage.target_table if lineage.pipeline == Pipeline.ROWS else None)
    rows, total = await quarantine.list_rows(
        conn, lineage_id, status=quarantine.QuarantineStatus(status) if status else None,
        offset=paging.offset, limit=paging.limit, q=q)
    return paging.of([_out(r) for r in rows], total)


@router.get("/{row_id}", response_model=Item[QuarantinedRowOut], responses=_READ_ERRORS,
            summary="One quarantined row: payload, reason, attempts")
async def show(access: CanRead, conn: Db, lineage_id: LineageId,
               row_id: RowId) -> Item[QuarantinedRowOut]:
    lineage = await get_lineage(conn, access.project_id, lineage_id)
    await quarantine.sweep(conn, lineage_id,
                           lineage.target_table if lineage.pipeline == Pipeline.ROWS else None)
    row = await quarantine.get_row(conn, lineage_id, row_id)
    if row is None:
        raise NotFoundError(f"quarantined row {row_id} not found in lineage {lineage_id}")
    return Item[QuarantinedRowOut](data=_out(row))


@router.post("/{row_id}/retry", response_model=Item[RetryResult], responses=_WRITE_ERRORS,
             summary="Write a quarantined row again, as it is or with values replaced")
async def retry(access: CanManage, conn: Db, request: Request, lineage_id: LineageId,
                row_id: RowId, body: RetryBody | None = None,
                idempotency_key: IdempotencyKey = None) -> Response:
    async def work(tx: Conn) -> tuple[int, Item[RetryResult]]:
        await get_lineage(tx, access.project_id, lineage_id)
        out = await operations.retry_row(tx, lineage_id, row_id, actor=access.actor,
                                         values=body.values if body else None)
        return 200, Item[RetryResult](data=RetryResult(
            id=out.id, status=out.status, written=out.written,
            reason_code=out.reason_code, reason=out.reason))

    return await idempotent(conn, access, request, idempotency_key, work)


@router.post("/retry", response_model=Item[RetryAllResult], responses=_WRITE_ERRORS,
             summary="Write every open quarantined row of the lineage again")
async def retry_all(access: CanManage, conn: Db, request: Request, lineage_id: LineageId,
                    idempotency_key: IdempotencyKey = None) -> Response:
    async def work(tx: Conn) -> tuple[int, Item[RetryAllResult]]:
        await get_lineage(tx, access.project_id, lineage_id)
        totals = await operations.retry_all(tx, lineage_id, actor=access.actor)
        return 200, Item[RetryAllResult](data=RetryAllResult(
            lineage_id=lineage_id, retried=totals.retried, failed=totals.failed,
            superseded=totals.superseded,
            failures=[RetryResult(id=f.id, status=f.status, written=False,
                                  reason_code=f.reason_code, reason=f.reason)
                      for f in totals.failures]))

    return await idempotent(conn, access, request, idempotency_key, work)


async def _discard(access: Access, tx: Conn, lineage_id: uuid.UUID,
                   row_id: int | None) -> tuple[int, Item[DiscardedRows]]:
    await get_lineage(tx, access.project_id, lineage_id)
    n = await operations.discard_quarantined(tx, access.project_id, lineage_id, row_id,
                                             actor=access.actor)
    return 200, Item[DiscardedRows](data=DiscardedRows(lineage_id=lineage_id,
                                                       discarded_rows=n))


@router.post("/{row_id}/discard", response_model=Item[DiscardedRows], responses=_WRITE_ERRORS,
             summary="Delete one quarantined row for good")
async def discard_one(access: CanManage, conn: Db, request: Request, lineage_id: LineageId,
                      row_id: RowId, idempotency_key: IdempotencyKey = None) -> Response:
    async def work(tx: Conn) -> tuple[int, Item[DiscardedRows]]:
        return await _discard(access, tx, lineage_id, row_id)

    return await idempotent(conn, access, request, idempotency_key, work)


@router.post("/discard", response_model=Item[DiscardedRows], responses=_WRITE_ERRORS,
             summary="Delete every quarantined row of the lineage for good")
async def discard_all(access: CanManage, conn: Db, request: Request, lineage_id: LineageId,
                      idempotency_key: IdempotencyKey = None) -> Response:
    async def work(tx: Conn) -> tuple[int, Item[DiscardedRows]]:
        return await _discard(access, tx, lineage_id, None)

    return await idempotent(conn, access, request, idempotency_key, work)
