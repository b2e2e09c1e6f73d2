"""``/edge/lineages/{id}``: decisions an operator revisits after an approval — rows of a
rejected schema version replayed under the approved one, and the table's
``sync_authority`` (docs/recovery.md)."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from edgesync import control, operations
from edgesync.api._auth import CanManage
from edgesync.api._db import Db
from edgesync.api._domain import model_of
from edgesync.api._envelopes import Item
from edgesync.api._errors import error_responses
from edgesync.api._idempotency import IdempotencyKey, idempotent
from edgesync.api._lineage_queries import get_lineage
from edgesync.governance import SyncAuthority
from edgesync.store import Conn

__all__ = ["router"]

router = APIRouter(prefix="/core/api/v1/projects/{project_id}/edge/lineages",
                   tags=["lineages"])
LineageId = Annotated[uuid.UUID, Path(description="lineage UUID")]
_WRITE_ERRORS = error_responses(400, 401, 403, 404, 409, 422)
Authority = Literal[SyncAuthority.DEVICE, SyncAuthority.CLOUD]


class ReplayRejectedBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_hash: str | None = Field(None, pattern=r"^[0-9a-f]{64}$",
                                    description="one rejected version (default: every one)")
    dry_run: bool = Field(False, description="only say which versions are compatible")


class RejectedVersionOut(BaseModel):
    schema_hash: str
    compatible: bool
    reasons: list[str] = Field(description="why not, when not compatible")
    staged_batches: int
    staged_rows: int
    rebound: bool = Field(description="now written with the approved version's bindings")


class ReplayRejectedResult(BaseModel):
    lineage_id: uuid.UUID
    approved_schema_hash: str
    dry_run: bool
    rebound_batches: int = Field(description="staged batches scheduled for replay")
    rebound_rows: int
    versions: list[RejectedVersionOut]


class SyncAuthorityBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sync_authority: Authority
    force: bool = Field(False, description="switch to device_authoritative even while "
                                           "state_write controls are not acknowledged")


class SyncAuthorityResult(BaseModel):
    lineage_id: uuid.UUID
    sync_authority: Authority
    previous: Authority
    changed: bool
    pending_state_writes: int = Field(description="state_write controls still to be "
                                                  "acknowledged (cloud → device)")
    cloud_versions_cleared: int = Field(description="mirror rows whose cloud version was "
                                                    "forgotten (cloud → device)")


@router.post("/{lineage_id}/replay-rejected", response_model=Item[ReplayRejectedResult],
             responses=_WRITE_ERRORS,
             summary="Replay rows of rejected schema versions under the approved one, "
                     "when compatible")
async def replay_rejected(access: CanManage, conn: Db, request: Request,
                          lineage_id: LineageId, body: ReplayRejectedBody,
                          idempotency_key: IdempotencyKey = None) -> Response:
    async def work(tx: Conn) -> tuple[int, Item[ReplayRejectedResult]]:
        await get_lineage(tx, access.project_id, lineage_id)
        out = await operations.replay_rejected(tx, lineage_id, actor=access.actor,
                                               schema_hash=body.schema_hash,
                                               dry_run=body.dry_run)
        return 200, Item[ReplayRejectedResult](
            data=ReplayRejectedResult.model_validate(out.as_json()))

    return await idempotent(conn, access, request, idempotency_key, work)


@router.post("/{lineage_id}/sync-authority", response_model=Item[SyncAuthorityResult],
             responses=_WRITE_ERRORS,
             summary="Change an approved state table's sync authority")
async def sync_authority(access: CanManage, conn: Db, request: Request, lineage_id: LineageId,
                         body: SyncAuthorityBody,
                         idempotency_key: IdempotencyKey = None) -> Response:
    async def work(tx: Conn) -> tuple[int, Item[SyncAuthorityResult]]:
        await get_lineage(tx, access.project_id, lineage_id)
        out = await control.change_sync_authority(tx, lineage_id, body.sync_authority,
                                                  actor=access.actor, force=body.force)
        return 200, Item[SyncAuthorityResult](data=model_of(SyncAuthorityResult, out))

    return await idempotent(conn, access, request, idempotency_key, work)
