"""``/edge/lineages/{id}/resnapshot[s]`` and ``/verify``/``/verifications``: send a state
table's rows again, and compare device and cloud (docs/recovery.md)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from edgesync import control
from edgesync.api._auth import CanManage, CanRead
from edgesync.api._db import Db
from edgesync.api._envelopes import Item, Page
from edgesync.api._errors import error_responses
from edgesync.api._idempotency import IdempotencyKey, idempotent
from edgesync.api._lineage_queries import get_lineage
from edgesync.api._pagination import Paging
from edgesync.store import Conn

__all__ = ["router"]

router = APIRouter(prefix="/core/api/v1/projects/{project_id}/edge/lineages/{lineage_id}",
                   tags=["recovery"])
LineageId = Annotated[uuid.UUID, Path(description="lineage UUID")]
_READ_ERRORS = error_responses(400, 401, 404, 422)
_WRITE_ERRORS = error_responses(400, 401, 403, 404, 409, 422)


class ResnapshotBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    filter: dict[str, Any] | None = Field(
        None, description='rows to send again: {"where": [{"column", "op", "value"}], '
                          '"key_range": {"from": {...}, "to": {...}}, "buckets": '
                          '{"prefix": 2, "values": ["0a"]}}; none: the whole table')


class ResnapshotOut(BaseModel):
    id: uuid.UUID
    lineage_id: uuid.UUID
    device_id: uuid.UUID
    filter: dict[str, Any]
    status: control.ResnapshotStatus
    rows_sent: int
    chunks: int
    journal_epoch: uuid.UUID | None
    first_commit_seq: int | None
    last_commit_seq: int | None
    swept_rows: int | None
    verification_id: uuid.UUID | None
    error: str | None
    requested_by: str | None
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None


class VerifyBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prefix: int = Field(control.DEFAULT_VERIFY_PREFIX, ge=1, le=4,
                        description="hex digits of _edge_pk_hash naming a bucket (2: 256)")
    repair: bool = Field(False, description="re-snapshot the buckets that differ")


class VerificationOut(BaseModel):
    id: uuid.UUID
    lineage_id: uuid.UUID
    device_id: uuid.UUID
    prefix: int
    columns: list[dict[str, Any]]
    skipped_columns: list[str]
    repair: bool
    status: control.VerificationStatus
    device_rows: int | None
    cloud_rows: int | None
    differing_buckets: list[str] | None
    changed_buckets: list[str] | None
    resnapshot_id: uuid.UUID | None
    error: str | None
    requested_by: str | None
    created_at: datetime
    completed_at: datetime | None


@router.post("/resnapshot", status_code=202, response_model=Item[ResnapshotOut],
             responses=_WRITE_ERRORS,
             summary="Ask the device to send the table's current rows again (optionally "
                     "filtered); merged newer-wins with live changes")
async def resnapshot(access: CanManage, conn: Db, request: Request, lineage_id: LineageId,
                     body: ResnapshotBody | None = None,
                     idempotency_key: IdempotencyKey = None) -> Response:
    async def work(tx: Conn) -> tuple[int, Item[ResnapshotOut]]:
        await get_lineage(tx, access.project_id, lineage_id)
        job = await control.request_resnapshot(
            tx, access.project_id, lineage_id, filter_doc=body.filter if body else None,
            actor=access.actor)
        return 202, Item[ResnapshotOut](data=ResnapshotOut.model_validate(job))

    return await idempotent(conn, access, request, idempotency_key, work)


@router.get("/resnapshots", response_model=Page[ResnapshotOut], responses=_READ_ERRORS,
            summary="Re-snapshots of the lineage and their progress, newest first")
async def resnapshots(access: CanRead, conn: Db, paging: Paging,
                      lineage_id: LineageId) -> Page[ResnapshotOut]:
    await get_lineage(conn, access.project_id, lineage_id)
    total = await conn.fetchval("SELECT count(*) FROM edge_resnapshots WHERE lineage_id = $1",
                                lineage_id)
    rows = await conn.fetch("SELECT * FROM edge_resnapshots WHERE lineage_id = $1 "
                            "ORDER BY created_at DESC, id DESC OFFSET $2 LIMIT $3",
                            lineage_id, paging.offset, paging.limit)
    return paging.of([ResnapshotOut.model_validate(dict(r)) for r in rows], int(total))


@router.post("/verify", status_code=202, response_model=Item[VerificationOut],
             responses=_WRITE_ERRORS,
             summary="Ask the device for a digest of the table and compare it with the mirror")
async def verify(access: CanManage, conn: Db, request: Request, lineage_id: LineageId,
                 body: VerifyBody | None = None,
                 idempotency_key: IdempotencyKey = None) -> Response:
    b = body or VerifyBody(prefix=control.DEFAULT_VERIFY_PREFIX, repair=False)

    async def work(tx: Conn) -> tuple[int, Item[VerificationOut]]:
        await get_lineage(tx, access.project_id, lineage_id)
        job = await control.request_verify(tx, access.project_id, lineage_id, prefix=b.prefix,
                                           repair=b.repair, actor=access.actor)
        return 202, Item[VerificationOut](data=VerificationOut.model_validate(job))

    return await idempotent(conn, access, request, idempotency_key, work)


@router.get("/verifications", response_model=Page[VerificationOut], responses=_READ_ERRORS,
            summary="Verifications of the lineage and their results, newest first")
async def verifications(access: CanRead, conn: Db, paging: Paging,
                        lineage_id: LineageId) -> Page[VerificationOut]:
    await get_lineage(conn, access.project_id, lineage_id)
    total = await conn.fetchval(
        "SELECT count(*) FROM edge_verifications WHERE lineage_id = $1", lineage_id)
    rows = await conn.fetch("SELECT * FROM edge_verifications WHERE lineage_id = $1 "
                            "ORDER BY created_at DESC, id DESC OFFSET $2 LIMIT $3",
                            lineage_id, paging.offset, paging.limit)
    return paging.of([VerificationOut.model_validate(dict(r)) for r in rows], int(total))
