"""``/edge/policy``: the project's edge replication policy."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from edgesync.api._auth import CanManage, CanRead
from edgesync.api._db import Db
from edgesync.api._envelopes import Item
from edgesync.api._errors import error_responses
from edgesync.api._idempotency import IdempotencyKey, idempotent
from edgesync.store import Conn

__all__ = ["DEFAULTS", "Policy", "PolicyPatch", "router"]

router = APIRouter(prefix="/core/api/v1/projects/{project_id}/edge/policy", tags=["policy"])

DEFAULTS: dict[str, Any] = {
    "allow_additive_continue": False,
    "max_pending_rows_per_lineage": 100_000,
    "max_pending_bytes_per_lineage": 1 << 30,
    "resume_threshold_percent": 80,
    "materialization_breaker_threshold": 5,
    "schema_coalescing_mode": "none",
    "allow_auto_create_device_data_points": False,
    "verify_interval_seconds": 0,
}

Positive = Annotated[StrictInt, Field(ge=1, le=2**62)]
CoalescingMode = Literal["none", "project", "fleet"]


class Policy(BaseModel):
    allow_additive_continue: bool = Field(
        description="auto-approve a schema that only adds nullable columns")
    max_pending_rows_per_lineage: int = Field(description="staged rows before backpressure")
    max_pending_bytes_per_lineage: int = Field(description="staged bytes before backpressure")
    resume_threshold_percent: int = Field(description="resume below this % of both caps")
    materialization_breaker_threshold: int = Field(
        description="permanent materialization errors before the lineage pauses")
    schema_coalescing_mode: CoalescingMode
    allow_auto_create_device_data_points: bool
    verify_interval_seconds: int = Field(
        description="verify every approved state lineage this often (0: never; "
                    "docs/recovery.md)")


class PolicyPatch(BaseModel):
    """Fields to change; ``null`` puts a field back to its default."""

    model_config = ConfigDict(extra="forbid")

    allow_additive_continue: StrictBool | None = None
    max_pending_rows_per_lineage: Positive | None = None
    max_pending_bytes_per_lineage: Positive | None = None
    resume_threshold_percent: Annotated[StrictInt, Field(ge=1, le=99)] | None = None
    materialization_breaker_threshold: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = (
        None)
    schema_coalescing_mode: CoalescingMode | None = None
    allow_auto_create_device_data_points: StrictBool | None = None
    verify_interval_seconds: Annotated[StrictInt, Field(ge=0, le=2**31)] | None = None


def _effective(stored: dict[str, Any]) -> Policy:
    return Policy.model_validate({k: stored.get(k, d) for k, d in DEFAULTS.items()})


async def _stored(conn: Conn, project_id: uuid.UUID, *, for_update: bool = False
                  ) -> dict[str, Any]:
    doc = await conn.fetchval("SELECT policy FROM edge_projects WHERE id = $1"
                              + (" FOR UPDATE" if for_update else ""), project_id)
    return dict(doc or {})


_RESPONSES = error_responses(400, 401, 404, 422)


@router.get("", response_model=Item[Policy], responses=_RESPONSES,
            summary="The project's effective policy (defaults filled in)")
async def get_policy(access: CanRead, conn: Db) -> Item[Policy]:
    return Item[Policy](data=_effective(await _stored(conn, access.project_id)))


@router.patch("", response_model=Item[Policy],
              responses=error_responses(400, 401, 403, 404, 422),
              summary="Change policy fields (coalescing mode, backlog caps, additive flags)")
async def patch_policy(access: CanManage, conn: Db, request: Request, body: PolicyPatch,
                       idempotency_key: IdempotencyKey = None) -> Response:
    changes = body.model_dump(exclude_unset=True)

    async def work(tx: Conn) -> tuple[int, Item[Policy]]:
        stored = await _stored(tx, access.project_id, for_update=True)
        for key, value in changes.items():
            if value is None:
                stored.pop(key, None)
            else:
                stored[key] = value
        await tx.execute("UPDATE edge_projects SET policy = $2 WHERE id = $1",
                         access.project_id, stored)
        return 200, Item[Policy](data=_effective(stored))

    return await idempotent(conn, access, request, idempotency_key, work)
