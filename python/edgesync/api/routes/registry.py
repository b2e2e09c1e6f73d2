"""``/edge/registry``, ``/edge/registry-reviews`` and ``/edge/coalesced-mirrors``: registry
coalescing (docs/governance.md), at project scope and, under ``/fleets/{fleet_id}``, at the
scope of one fleet of the project (the same routes, limited to that fleet's entries)."""

# No ``from __future__ import annotations``: the routes are built in a function, and FastAPI
# must see their (local) dependency types as objects, not as strings it cannot resolve.
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query, Request, Response

from edgesync import governance
from edgesync.api._auth import Access, CanManage, CanRead
from edgesync.api._db import Db
from edgesync.api._domain import model_of
from edgesync.api._envelopes import Item, Page
from edgesync.api._errors import ApiError, error_responses
from edgesync.api._idempotency import IdempotencyKey, idempotent
from edgesync.api._pagination import Paging
from edgesync.api._preview import ApprovalPreview, preview_registry_review
from edgesync.api._registry_models import (
    CoalescedMirrorOut,
    ConsolidationOut,
    RegistryApproveBody,
    RegistryEntryDetail,
    RegistryEntryOut,
    RegistryReasonBody,
    RegistryReviewDetail,
    RegistryReviewOut,
)
from edgesync.api._review_models import ClaimBody, PreviewBody
from edgesync.api._review_queries import OPEN, OPEN_STATUSES, check_action_version
from edgesync.api._search import MAX_SEARCH, SearchText
from edgesync.errors import ApiErrorCode, NotFoundError
from edgesync.store import Conn

__all__ = ["fleet_router", "router"]

_READ_ERRORS = error_responses(400, 401, 404, 422)
_WRITE_ERRORS = error_responses(400, 401, 403, 404, 409, 422)
RegistryId = Annotated[uuid.UUID, Path(description="registry entry UUID")]
ReviewId = Annotated[uuid.UUID, Path(description="registry review UUID")]
MirrorId = Annotated[str, Path(max_length=200, description="coalesced mirror id: its table")]
SourceTable = Annotated[str, Path(min_length=1, max_length=200,
                                  description="the devices' source table (as they name it)")]
FleetId = Annotated[uuid.UUID, Path(description="fleet UUID (a fleet of the project)")]


@dataclass(frozen=True, slots=True)
class Scope:
    """Who calls, and which part of the project's registry they address (a fleet or all)."""

    access: Access
    fleet_id: uuid.UUID | None

    def holds(self, obj: governance.RegistryEntry | governance.RegistryReview
              | governance.CoalescedMirror) -> bool:
        return self.fleet_id is None or obj.fleet_id == self.fleet_id


async def _fleet(conn: Conn, access: Access, fleet_id: uuid.UUID) -> Scope:
    found = await conn.fetchval("SELECT EXISTS (SELECT 1 FROM edge_fleets WHERE id = $1 "
                                "AND project_id = $2)", fleet_id, access.project_id)
    if not found:
        raise ApiError(404, ApiErrorCode.FLEET_NOT_FOUND, "fleet not found")
    return Scope(access, fleet_id)


async def _project_read(access: CanRead) -> Scope:
    return Scope(access, None)


async def _project_manage(access: CanManage) -> Scope:
    return Scope(access, None)


async def _fleet_read(access: CanRead, conn: Db, fleet_id: FleetId) -> Scope:
    return await _fleet(conn, access, fleet_id)


async def _fleet_manage(access: CanManage, conn: Db, fleet_id: FleetId) -> Scope:
    return await _fleet(conn, access, fleet_id)


def entry_not_found() -> ApiError:
    return ApiError(404, ApiErrorCode.REGISTRY_ENTRY_NOT_FOUND, "registry entry not found")


def review_not_found() -> ApiError:
    return ApiError(404, ApiErrorCode.REGISTRY_REVIEW_NOT_FOUND, "registry review not found")


def mirror_not_found() -> ApiError:
    return ApiError(404, ApiErrorCode.COALESCED_MIRROR_NOT_FOUND, "coalesced mirror not found")


async def _review(conn: Conn, scope: Scope, review_id: uuid.UUID
                  ) -> governance.RegistryReview:
    try:
        review = await governance.get_registry_review(conn, review_id,
                                                      project_id=scope.access.project_id)
    except NotFoundError:
        raise review_not_found() from None
    if not scope.holds(review):
        raise review_not_found()
    return review


async def _review_detail(conn: Conn, review: governance.RegistryReview
                         ) -> RegistryReviewDetail:
    entry = await governance.get_registry_entry(conn, review.project_id, review.registry_id)
    suggested = None
    if review.status in (governance.ReviewStatus.QUEUED, governance.ReviewStatus.IN_REVIEW):
        suggested = [s.as_json() for s in
                     await governance.suggest_for_registry_review(conn, review.registry_id)]
    return model_of(RegistryReviewDetail, review, schema_columns=entry.schema_columns,
                    devices=entry.devices, suggested_column_actions=suggested)


def _mirror_out(mirror: governance.CoalescedMirror) -> CoalescedMirrorOut:
    return model_of(CoalescedMirrorOut, mirror, id=mirror.target_table)


async def _fleet_filter(fleet_id: Annotated[uuid.UUID | None, Query(
        description="only this fleet's items")] = None) -> uuid.UUID | None:
    return fleet_id


async def _no_filter() -> uuid.UUID | None:
    return None  # the path names the fleet


_ScopeDep = Callable[..., Awaitable[Scope]]


def _make_router(prefix: str, tag: str, read: _ScopeDep, manage: _ScopeDep,
                 only: Callable[..., Awaitable[uuid.UUID | None]]) -> APIRouter:
    r = APIRouter(prefix=prefix, tags=[tag])
    Read = Annotated[Scope, Depends(read)]
    Manage = Annotated[Scope, Depends(manage)]
    Only = Annotated[uuid.UUID | None, Depends(only)]

    @r.get("/registry", response_model=Page[RegistryEntryOut], responses=_READ_ERRORS,
           summary="List schema registry entries")
    async def list_entries(
        scope: Read, conn: Db, paging: Paging, only: Only,
        status: Annotated[governance.SchemaStatus | None,
                          Query()] = None,
    ) -> Page[RegistryEntryOut]:
        items = await governance.list_registry_entries(
            conn, scope.access.project_id, fleet_id=scope.fleet_id or only, status=status)
        page = items[paging.offset:paging.offset + paging.limit]
        return paging.of([model_of(RegistryEntryOut, e) for e in page], len(items))

    @r.get("/registry/{registry_id}", response_model=Item[RegistryEntryDetail],
           responses=_READ_ERRORS, summary="Registry entry detail, with its devices")
    async def entry_detail(scope: Read, conn: Db,
                           registry_id: RegistryId) -> Item[RegistryEntryDetail]:
        try:
            entry = await governance.get_registry_entry(conn, scope.access.project_id,
                                                        registry_id)
        except NotFoundError:
            raise entry_not_found() from None
        if not scope.holds(entry):
            raise entry_not_found()
        return Item[RegistryEntryDetail](data=model_of(RegistryEntryDetail, entry))

    @r.get("/registry-reviews", response_model=Page[RegistryReviewOut], responses=_READ_ERRORS,
           summary="List registry reviews")
    async def list_reviews(
        scope: Read, conn: Db, paging: Paging, only: Only,
        status: Annotated[governance.ReviewStatus | Literal["open"] | None, Query(
            description="a status, or open: queued or in review")] = None,
        q: Annotated[SearchText, Query(
            max_length=MAX_SEARCH,
            description="only registry reviews whose source or target table, "
                        "schema hash, classification, claimer, decider, "
                        "decision reason or linked device's name contains "
                        "this (any case)")] = None,
    ) -> Page[RegistryReviewOut]:
        items = await governance.list_registry_reviews(
            conn, scope.access.project_id, status=None if status == OPEN else status,
            fleet_id=scope.fleet_id or only, q=q)
        if status == OPEN:
            items = [x for x in items if x.status in OPEN_STATUSES]
        page = items[paging.offset:paging.offset + paging.limit]
        return paging.of([model_of(RegistryReviewOut, x) for x in page], len(items))

    @r.get("/registry-reviews/{review_id}", response_model=Item[RegistryReviewDetail],
           responses=_READ_ERRORS,
           summary="Registry review detail: schema columns and the devices waiting on it")
    async def review_detail(scope: Read, conn: Db,
                            review_id: ReviewId) -> Item[RegistryReviewDetail]:
        review = await _review(conn, scope, review_id)
        return Item[RegistryReviewDetail](data=await _review_detail(conn, review))

    @r.post("/registry-reviews/{review_id}/claim", response_model=Item[RegistryReviewOut],
            responses=_WRITE_ERRORS, summary="queued → in_review")
    async def claim(scope: Manage, conn: Db, request: Request,
                    review_id: ReviewId, body: ClaimBody,
                    idempotency_key: IdempotencyKey = None) -> Response:
        access = scope.access

        async def work(tx: Conn) -> tuple[int, Item[RegistryReviewOut]]:
            check_action_version(await _review(tx, scope, review_id), body.action_version)
            result = await governance.claim_registry_review(
                tx, review_id, actor=access.actor, action_version=body.action_version,
                project_id=access.project_id)
            return 200, Item[RegistryReviewOut](data=model_of(RegistryReviewOut, result))

        return await idempotent(conn, access, request, idempotency_key, work)

    @r.post("/registry-reviews/{review_id}/approve", response_model=Item[RegistryReviewOut],
            responses=_WRITE_ERRORS,
            summary="in_review → approved: provision the coalesced target and approve every "
                    "waiting device")
    async def approve(scope: Manage, conn: Db, request: Request,
                      review_id: ReviewId, body: RegistryApproveBody,
                      idempotency_key: IdempotencyKey = None) -> Response:
        access = scope.access
        actions = (None if body.column_actions is None else
                   [a.model_dump(exclude_none=True) for a in body.column_actions])

        async def work(tx: Conn) -> tuple[int, Item[RegistryReviewOut]]:
            check_action_version(await _review(tx, scope, review_id), body.action_version)
            result = await governance.approve_registry_review(
                tx, review_id, actor=access.actor, action_version=body.action_version,
                column_actions=actions, project_id=access.project_id)
            return 200, Item[RegistryReviewOut](data=model_of(RegistryReviewOut, result))

        return await idempotent(conn, access, request, idempotency_key, work)

    @r.post("/registry-reviews/{review_id}/preview", response_model=Item[ApprovalPreview],
            responses=_WRITE_ERRORS,
            summary="What approving with these column actions would give (changes nothing)")
    async def preview(scope: Read, conn: Db, review_id: ReviewId,
                      body: PreviewBody) -> Item[ApprovalPreview]:
        review = await _review(conn, scope, review_id)
        actions = (None if body.column_actions is None else
                   [a.model_dump(exclude_none=True) for a in body.column_actions])
        return Item[ApprovalPreview](data=await preview_registry_review(conn, review, actions))

    def _decision(action: Literal["reject", "abandon"], summary: str) -> None:
        decide = (governance.reject_registry_review if action == "reject"
                  else governance.abandon_registry_review)

        @r.post(f"/registry-reviews/{{review_id}}/{action}",
                response_model=Item[RegistryReviewOut], responses=_WRITE_ERRORS,
                summary=summary, name=f"{action}_registry_review")
        async def decision(scope: Manage, conn: Db, request: Request,
                           review_id: ReviewId, body: RegistryReasonBody,
                           idempotency_key: IdempotencyKey = None) -> Response:
            access = scope.access

            async def work(tx: Conn) -> tuple[int, Item[RegistryReviewOut]]:
                check_action_version(await _review(tx, scope, review_id), body.action_version)
                result = await decide(tx, review_id, actor=access.actor,
                                      action_version=body.action_version, reason=body.reason,
                                      project_id=access.project_id)
                return 200, Item[RegistryReviewOut](data=model_of(RegistryReviewOut, result))

            return await idempotent(conn, access, request, idempotency_key, work)

    _decision("reject", "queued | in_review → rejected: waiting devices stay paused and staging")
    _decision("abandon", "queued | in_review → abandoned: each waiting device gets its own "
                         "device review")

    @r.get("/coalesced-mirrors", response_model=Page[CoalescedMirrorOut],
           responses=_READ_ERRORS, summary="List coalesced mirrors (shared targets)")
    async def list_mirrors(
        scope: Read, conn: Db, paging: Paging, only: Only,
        q: Annotated[SearchText, Query(
            max_length=MAX_SEARCH,
            description="only mirrors whose target or source table, or the "
                        "name of a device writing to it, contains this "
                        "(any case)")] = None,
    ) -> Page[CoalescedMirrorOut]:
        items = await governance.list_coalesced_mirrors(conn, scope.access.project_id,
                                                        fleet_id=scope.fleet_id or only, q=q)
        page = items[paging.offset:paging.offset + paging.limit]
        return paging.of([_mirror_out(m) for m in page], len(items))

    @r.get("/coalesced-mirrors/{mirror_id}", response_model=Item[CoalescedMirrorOut],
           responses=_READ_ERRORS, summary="Coalesced mirror detail")
    async def mirror_detail(scope: Read, conn: Db,
                            mirror_id: MirrorId) -> Item[CoalescedMirrorOut]:
        try:
            mirror = await governance.get_coalesced_mirror(conn, scope.access.project_id,
                                                           mirror_id)
        except NotFoundError:
            raise mirror_not_found() from None
        if not scope.holds(mirror):
            raise mirror_not_found()
        return Item[CoalescedMirrorOut](data=_mirror_out(mirror))

    @r.post("/coalesced-mirrors/{source_table}/consolidate",
            response_model=Item[ConsolidationOut], responses=_WRITE_ERRORS,
            summary="Move device-scoped lineages of a table into its coalesced mirror",
            description="For a project switched from schema_coalescing_mode none to project "
                        "or fleet: every device lineage of the table (of this fleet, on the "
                        "fleet route) that still writes to its own target and whose approved "
                        "schema is approved in the registry has its rows (and tombstones) "
                        "copied into the coalesced target and is re-bound to the registry's "
                        "column actions. Old tables are kept. 409 when the project does not "
                        "coalesce or no registry entry of the table is approved. A repeated "
                        "call consolidates nothing more.")
    async def consolidate(scope: Manage, conn: Db, request: Request,
                          source_table: SourceTable,
                          idempotency_key: IdempotencyKey = None) -> Response:
        access = scope.access

        async def work(tx: Conn) -> tuple[int, Item[ConsolidationOut]]:
            result = await governance.consolidate(tx, access.project_id, source_table,
                                                  fleet_id=scope.fleet_id, actor=access.actor)
            return 200, Item[ConsolidationOut](data=model_of(ConsolidationOut, result))

        return await idempotent(conn, access, request, idempotency_key, work)

    return r


_PROJECT = "/core/api/v1/projects/{project_id}"
router = _make_router(_PROJECT + "/edge", "registry", _project_read, _project_manage,
                      _fleet_filter)
fleet_router = _make_router(_PROJECT + "/fleets/{fleet_id}/edge", "registry (fleet scope)",
                            _fleet_read, _fleet_manage, _no_filter)
