"""``/edge/lineages/{id}/resnapshot[s]`` and ``/verify``/``/verifications``: send a state
table's rows again, and compare device and cloud (docs/recovery.md)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Path, Request, Response

from edgesync import control, operations
from edgesync.api._auth import CanManage, CanRead
from edgesync.api._db import Db
from edgesync.api._domain import model_of
from edgesync.api._envelopes import Item, Page
from edgesync.api._errors import error_responses
from edgesync.api._idempotency import IdempotencyKey, idempotent
from edgesync.api._lineage_queries import get_lineage
from edgesync.api._pagination import Paging
from edgesync.api._recovery_models import (
    ResnapshotBody,
    ResnapshotOut,
    VerificationOut,
    VerifyBody,
)
from edgesync.store import Conn

__all__ = ["router"]

router = APIRouter(prefix="/core/api/v1/projects/{project_id}/edge/lineages/{lineage_id}",
                   tags=["recovery"])
LineageId = Annotated[uuid.UUID, Path(description="lineage UUID")]
_READ_ERRORS = error_responses(400, 401, 404, 422)
_WRITE_ERRORS = error_responses(400, 401, 403, 404, 409, 422)


@router.post("/resnapshot", status_code=202, response_model=Item[ResnapshotOut],
             responses=_WRITE_ERRORS,
             summary="Ask the device to send the table's current rows again (optionally "
                     "filtered); merged newer-wins with live changes")
async def resnapshot(access: CanManage, conn: Db, request: Request, lineage_id: LineageId,
                     body: ResnapshotBody | None = None,
                     idempotency_key: IdempotencyKey = None) -> Response:
    async def work(tx: Conn) -> tuple[int, Item[ResnapshotOut]]:
        await get_lineage(tx, access.project_id, lineage_id)
        job = await operations.request_resnapshot(
            tx, access.project_id, lineage_id, filter_doc=body.filter if body else None,
            actor=access.actor)
        return 202, Item[ResnapshotOut](data=model_of(ResnapshotOut, job))

    return await idempotent(conn, access, request, idempotency_key, work)


@router.get("/resnapshots", response_model=Page[ResnapshotOut], responses=_READ_ERRORS,
            summary="Re-snapshots of the lineage and their progress, newest first")
async def resnapshots(access: CanRead, conn: Db, paging: Paging,
                      lineage_id: LineageId) -> Page[ResnapshotOut]:
    await get_lineage(conn, access.project_id, lineage_id)
    rows, total = await control.recovery_jobs(conn, "resnapshot", lineage_id,
                                              offset=paging.offset, limit=paging.limit)
    return paging.of([model_of(ResnapshotOut, r) for r in rows], total)


@router.post("/verify", status_code=202, response_model=Item[VerificationOut],
             responses=_WRITE_ERRORS,
             summary="Ask the device for a digest of the table and compare it with the mirror")
async def verify(access: CanManage, conn: Db, request: Request, lineage_id: LineageId,
                 body: VerifyBody | None = None,
                 idempotency_key: IdempotencyKey = None) -> Response:
    b = body or VerifyBody(prefix=control.DEFAULT_VERIFY_PREFIX, repair=False)

    async def work(tx: Conn) -> tuple[int, Item[VerificationOut]]:
        await get_lineage(tx, access.project_id, lineage_id)
        job = await operations.request_verify(tx, access.project_id, lineage_id,
                                              prefix=b.prefix, repair=b.repair,
                                              actor=access.actor)
        return 202, Item[VerificationOut](data=model_of(VerificationOut, job))

    return await idempotent(conn, access, request, idempotency_key, work)


@router.get("/verifications", response_model=Page[VerificationOut], responses=_READ_ERRORS,
            summary="Verifications of the lineage and their results, newest first")
async def verifications(access: CanRead, conn: Db, paging: Paging,
                        lineage_id: LineageId) -> Page[VerificationOut]:
    await get_lineage(conn, access.project_id, lineage_id)
    rows, total = await control.recovery_jobs(conn, "verification", lineage_id,
                                              offset=paging.offset, limit=paging.limit)
    return paging.of([model_of(VerificationOut, r) for r in rows], total)
