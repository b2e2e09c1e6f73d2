"""``/edge/policy``: the project's edge replication policy."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from edgesync.api._auth import CanManage, CanRead
from edgesync.api._db import Db
from edgesync.api._envelopes import Item
from edgesync.api._errors import error_responses
from edgesync.api._idempotency import IdempotencyKey, idempotent
from edgesync.fleet import (
    POLICY_BOUNDS,
    CoalescingMode,
    ProjectPolicy,
    store_policy,
    stored_policy,
)
from edgesync.store import Conn

__all__ = ["DEFAULTS", "Policy", "PolicyPatch", "router"]

router = APIRouter(prefix="/core/api/v1/projects/{project_id}/edge/policy", tags=["policy"])

# The defaults are ProjectPolicy's (edgesync.fleet); the models below only describe
# the HTTP shape (and refuse a bad PATCH with the field named, as every route does).
DEFAULTS: dict[str, Any] = ProjectPolicy().as_json()


def _bounds(name: str) -> Any:
    lo, hi = POLICY_BOUNDS[name]
    return Field(ge=lo, le=hi)


_Rows = Annotated[StrictInt, _bounds("max_pending_rows_per_lineage")]
_Bytes = Annotated[StrictInt, _bounds("max_pending_bytes_per_lineage")]
_Resume = Annotated[StrictInt, _bounds("resume_threshold_percent")]
_Breaker = Annotated[StrictInt, _bounds("materialization_breaker_threshold")]
_Verify = Annotated[StrictInt, _bounds("verify_interval_seconds")]


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
    max_pending_rows_per_lineage: _Rows | None = None
    max_pending_bytes_per_lineage: _Bytes | None = None
    resume_threshold_percent: _Resume | None = None
    materialization_breaker_threshold: _Breaker | None = None
    schema_coalescing_mode: CoalescingMode | None = None
    allow_auto_create_device_data_points: StrictBool | None = None
    verify_interval_seconds: _Verify | None = None


def _effective(stored: dict[str, Any]) -> Policy:
    return Policy.model_validate(ProjectPolicy.from_stored(stored).as_json())


_RESPONSES = error_responses(400, 401, 404, 422)


@router.get("", response_model=Item[Policy], responses=_RESPONSES,
            summary="The project's effective policy (defaults filled in)")
async def get_policy(access: CanRead, conn: Db) -> Item[Policy]:
    return Item[Policy](data=_effective(await stored_policy(conn, access.project_id)))


@router.patch("", response_model=Item[Policy],
              responses=error_responses(400, 401, 403, 404, 422),
              summary="Change policy fields (coalescing mode, backlog caps, additive flags)")
async def patch_policy(access: CanManage, conn: Db, request: Request, body: PolicyPatch,
                       idempotency_key: IdempotencyKey = None) -> Response:
    changes = body.model_dump(exclude_unset=True)

    async def work(tx: Conn) -> tuple[int, Item[Policy]]:
        stored = ProjectPolicy.changed(
            await stored_policy(tx, access.project_id, for_update=True), changes)
        await store_policy(tx, access.project_id, stored)
        return 200, Item[Policy](data=_effective(stored))

    return await idempotent(conn, access, request, idempotency_key, work)
