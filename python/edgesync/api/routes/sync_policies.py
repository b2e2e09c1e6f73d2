"""``/edge/sync-policies``: sync policies (``table_strategies`` for agents), the
introspection of a sample database, attachments to devices and fleets."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from edgesync import operations, syncpolicy
from edgesync.api._auth import CanManage, CanRead
from edgesync.api._db import Db
from edgesync.api._domain import model_of
from edgesync.api._envelopes import Item, Page
from edgesync.api._errors import ApiError, error_responses
from edgesync.api._idempotency import IdempotencyKey, idempotent
from edgesync.api._pagination import Paging
from edgesync.errors import ApiErrorCode, ConflictError, NotFoundError
from edgesync.store import Conn

__all__ = ["router"]

router = APIRouter(prefix="/core/api/v1/projects/{project_id}/edge/sync-policies",
                   tags=["sync policies"])

_STRATEGIES = Field(
    description="table → {strategy: rows|telemetry|ignore, ts_column?, include_columns?, "
                "priority?}; unlisted tables replicate as rows (docs/agent.md)")
_COMPRESSION = ("how the agents send row and telemetry batches: none or zstd; null leaves "
                "each agent's YAML setting (docs/agent.md)")
_PER_SECOND = ("the agents' connection.max_bytes_per_second (bytes, 0: unlimited); null "
               "leaves each agent's YAML setting")
_PER_DAY = ("the agents' connection.max_bytes_per_day (bytes of a UTC day, 0: unlimited); "
            "null leaves each agent's YAML setting")


class SyncPolicy(BaseModel):
    id: uuid.UUID
    name: str
    description: str
    table_strategies: dict[str, dict[str, Any]] = _STRATEGIES
    sample_tables: dict[str, list[str]] | None = Field(
        description="the sample database's tables and columns the strategies were picked from")
    compression: str | None = Field(None, description=_COMPRESSION)
    max_bytes_per_second: int | None = Field(None, description=_PER_SECOND)
    max_bytes_per_day: int | None = Field(None, description=_PER_DAY)
    version: int = Field(description="raised by every change")
    created_at: datetime
    updated_at: datetime


class SyncPolicyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=200)
    description: str = Field("", max_length=2000)
    table_strategies: dict[str, Any] = Field(default_factory=dict,
                                             description=_STRATEGIES.description)
    sample_tables: dict[str, Any] | None = Field(
        None, description="table → column names (from /introspect); when given, every table "
                          "and column the strategies name must be in it")
    compression: str | None = Field(None, description=_COMPRESSION)
    max_bytes_per_second: int | None = Field(None, description=_PER_SECOND)
    max_bytes_per_day: int | None = Field(None, description=_PER_DAY)


class SyncPolicyPatch(BaseModel):
    """Fields to change (the others stay)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, max_length=200)
    description: str | None = Field(None, max_length=2000)
    table_strategies: dict[str, Any] | None = None
    sample_tables: dict[str, Any] | None = None
    compression: str | None = Field(None, description=_COMPRESSION)
    max_bytes_per_second: int | None = Field(None, description=_PER_SECOND)
    max_bytes_per_day: int | None = Field(None, description=_PER_DAY)


# PATCH keys whose null is a value (not "unchanged"): back to none / to the agents' YAML.
_NULLABLE = ("sample_tables", "compression", "max_bytes_per_second", "max_bytes_per_day")


class Target(BaseModel):
    model_config = ConfigDict(extra="forbid")

    device_id: uuid.UUID | None = None
    fleet_id: uuid.UUID | None = None


class Attachment(BaseModel):
    id: uuid.UUID
    policy_id: uuid.UUID
    device_id: uuid.UUID | None
    fleet_id: uuid.UUID | None
    created_at: datetime


class ListedAttachment(BaseModel):
    id: uuid.UUID
    attached_to: syncpolicy.AttachedTo = Field(description="device or fleet")
    device_id: uuid.UUID | None
    fleet_id: uuid.UUID | None
    name: str = Field(description="the device's or the fleet's name")
    created_at: datetime = Field(description="when it was attached (attaching again renews it)")


class Detached(BaseModel):
    policy_id: uuid.UUID
    device_id: uuid.UUID | None
    fleet_id: uuid.UUID | None
    detached: bool = True


class Deleted(BaseModel):
    id: uuid.UUID
    deleted: bool = True


class PolicyDevice(BaseModel):
    device_id: uuid.UUID
    name: str
    attached_via: Literal["device", "fleet"]
    delivery: Literal["pending", "acked"] | None = Field(
        description="the latest sync_policy control: pending, acked by the agent, or none sent")
    delivered_version: int | None
    acked_at: datetime | None


class SampleColumn(BaseModel):
    name: str
    type: str
    primary_key: int = Field(description="1-based position in the primary key; 0 if not in it")
    not_null: bool


class SampleTableOut(BaseModel):
    name: str
    columns: list[SampleColumn]
    row_count: int
    suggested: dict[str, Any] = Field(description="a table_strategies entry")
    reason: str


class Introspection(BaseModel):
    tables: list[SampleTableOut]
    table_strategies: dict[str, dict[str, Any]] = Field(
        description="the suggestion for every table, ready for a new policy")
    sample_tables: dict[str, list[str]] = Field(description="table → column names")


_NOT_FOUND = {"no sync policy": (ApiErrorCode.SYNC_POLICY_NOT_FOUND, None),
              "no device": (ApiErrorCode.DEVICE_NOT_FOUND, "device_id"),
              "no fleet": (ApiErrorCode.FLEET_NOT_FOUND, "fleet_id"),
              "the policy is not attached": (ApiErrorCode.ATTACHMENT_NOT_FOUND, None)}


def _api(exc: NotFoundError | ConflictError) -> ApiError:
    if isinstance(exc, ConflictError):
        return ApiError(409, ApiErrorCode.SYNC_POLICY_NAME_IN_USE, str(exc), "name")
    for prefix, (code, field) in _NOT_FOUND.items():
        if str(exc).startswith(prefix):
            return ApiError(404, code, str(exc), field)
    return ApiError(404, ApiErrorCode.NOT_FOUND, str(exc))


_READ = error_responses(400, 401, 404, 422)
_WRITE = error_responses(400, 401, 403, 404, 409, 422)


@router.get("", response_model=Page[SyncPolicy], responses=_READ,
            summary="List the project's sync policies")
async def list_sync_policies(access: CanRead, conn: Db, paging: Paging) -> Page[SyncPolicy]:
    found, total = await syncpolicy.list_policies(conn, access.project_id,
                                                  offset=paging.offset, limit=paging.limit)
    return paging.of([model_of(SyncPolicy, p) for p in found], total)


@router.post("/introspect", response_model=Item[Introspection], responses=_READ,
             summary="Introspect a sample SQLite database (the request body is the .db file)",
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/octet-stream": {"schema": {"type": "string",
                                                         "format": "binary"}}}}})
async def introspect(access: CanRead, request: Request) -> Item[Introspection]:
    """Read-only: nothing is stored. Answers the tables, their columns and types, and a
    suggested strategy each; pass ``table_strategies`` (edited) and ``sample_tables`` to
    create a policy."""
    tables = syncpolicy.introspect_sample(await request.body())
    return Item[Introspection](data=Introspection(
        tables=[model_of(SampleTableOut, t) for t in tables],
        table_strategies={t.name: t.suggested for t in tables},
        sample_tables={t.name: [c["name"] for c in t.columns] for t in tables}))


@router.post("", status_code=201, response_model=Item[SyncPolicy], responses=_WRITE,
             summary="Create a sync policy (name unique per project)")
async def create_sync_policy(access: CanManage, conn: Db, request: Request, body: SyncPolicyIn,
                             idempotency_key: IdempotencyKey = None) -> Response:
    async def work(tx: Conn) -> tuple[int, Item[SyncPolicy]]:
        try:
            policy = await syncpolicy.create_policy(
                tx, access.project_id, name=body.name, description=body.description,
                table_strategies=body.table_strategies, sample_tables=body.sample_tables,
                wire={"compression": body.compression,
                      "max_bytes_per_second": body.max_bytes_per_second,
                      "max_bytes_per_day": body.max_bytes_per_day})
        except ConflictError as exc:
            raise _api(exc) from exc
        return 201, Item[SyncPolicy](data=model_of(SyncPolicy, policy))

    return await idempotent(conn, access, request, idempotency_key, work)


@router.get("/{policy_id}", response_model=Item[SyncPolicy], responses=_READ,
            summary="One sync policy")
async def get_sync_policy(access: CanRead, conn: Db, policy_id: uuid.UUID) -> Item[SyncPolicy]:
    try:
        policy = await syncpolicy.get_policy(conn, access.project_id, policy_id)
    except NotFoundError as exc:
        raise _api(exc) from exc
    return Item[SyncPolicy](data=model_of(SyncPolicy, policy))


@router.patch("/{policy_id}", response_model=Item[SyncPolicy], responses=_WRITE,
              summary="Change a sync policy; attached agents that opted in apply it")
async def patch_sync_policy(access: CanManage, conn: Db, request: Request,
                            policy_id: uuid.UUID, body: SyncPolicyPatch,
                            idempotency_key: IdempotencyKey = None) -> Response:
    changes = {k: v for k, v in body.model_dump(exclude_unset=True).items()
               if v is not None or k in _NULLABLE}

    async def work(tx: Conn) -> tuple[int, Item[SyncPolicy]]:
        try:
            policy = await syncpolicy.update_policy(tx, access.project_id, policy_id, changes)
        except (NotFoundError, ConflictError) as exc:
            raise _api(exc) from exc
        return 200, Item[SyncPolicy](data=model_of(SyncPolicy, policy))

    return await idempotent(conn, access, request, idempotency_key, work)


@router.delete("/{policy_id}", response_model=Item[Deleted], responses=_WRITE,
               summary="Delete a sync policy (its devices fall back to their fleet's, or none)")
async def delete_sync_policy(access: CanManage, conn: Db, request: Request,
                             policy_id: uuid.UUID,
                             idempotency_key: IdempotencyKey = None) -> Response:
    async def work(tx: Conn) -> tuple[int, Item[Deleted]]:
        try:
            await syncpolicy.delete_policy(tx, access.project_id, policy_id)
        except NotFoundError as exc:
            raise _api(exc) from exc
        return 200, Item[Deleted](data=Deleted(id=policy_id))

    return await idempotent(conn, access, request, idempotency_key, work)


@router.post("/{policy_id}/attach", response_model=Item[Attachment], responses=_WRITE,
             summary="Attach to a device or a fleet (replacing its policy)")
async def attach(access: CanManage, conn: Db, request: Request, policy_id: uuid.UUID,
                 body: Target, idempotency_key: IdempotencyKey = None) -> Response:
    async def work(tx: Conn) -> tuple[int, Item[Attachment]]:
        try:
            attached = await operations.attach_policy(tx, access.project_id, policy_id,
                                                      device_id=body.device_id,
                                                      fleet_id=body.fleet_id)
        except NotFoundError as exc:
            raise _api(exc) from exc
        return 200, Item[Attachment](data=model_of(Attachment, attached))

    return await idempotent(conn, access, request, idempotency_key, work)


@router.post("/{policy_id}/detach", response_model=Item[Detached], responses=_WRITE,
             summary="Detach from a device or a fleet")
async def detach(access: CanManage, conn: Db, request: Request, policy_id: uuid.UUID,
                 body: Target, idempotency_key: IdempotencyKey = None) -> Response:
    async def work(tx: Conn) -> tuple[int, Item[Detached]]:
        try:
            await syncpolicy.detach_policy(tx, access.project_id, policy_id,
                                           device_id=body.device_id, fleet_id=body.fleet_id)
        except NotFoundError as exc:
            raise _api(exc) from exc
        return 200, Item[Detached](data=Detached(policy_id=policy_id, device_id=body.device_id,
                                                 fleet_id=body.fleet_id))

    return await idempotent(conn, access, request, idempotency_key, work)


@router.get("/{policy_id}/attachments", response_model=Item[list[ListedAttachment]],
            responses=_READ, summary="The devices and fleets the policy is attached to")
async def attachments(access: CanRead, conn: Db, policy_id: uuid.UUID
                      ) -> Item[list[ListedAttachment]]:
    try:
        found = await syncpolicy.list_attachments(conn, access.project_id, policy_id)
    except NotFoundError as exc:
        raise _api(exc) from exc
    return Item[list[ListedAttachment]](data=[model_of(ListedAttachment, a) for a in found])


@router.get("/{policy_id}/devices", response_model=Item[list[PolicyDevice]], responses=_READ,
            summary="The devices the policy governs and whether it reached them")
async def governed_devices(access: CanRead, conn: Db, policy_id: uuid.UUID
                           ) -> Item[list[PolicyDevice]]:
    try:
        devices = await syncpolicy.policy_devices(conn, access.project_id, policy_id)
    except NotFoundError as exc:
        raise _api(exc) from exc
    return Item[list[PolicyDevice]](data=[model_of(PolicyDevice, d) for d in devices])
