"""``/edge/schema-reviews``: list, detail, claim, approve, reject."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Request, Response

from edgesync import governance, operations
from edgesync.api._auth import CanManage, CanRead
from edgesync.api._db import Db
from edgesync.api._envelopes import Item, Page
from edgesync.api._errors import error_responses
from edgesync.api._idempotency import IdempotencyKey, idempotent
from edgesync.api._pagination import Paging
from edgesync.api._preview import ApprovalPreview, preview_review
from edgesync.api._review_models import (
    ApproveBody,
    ClaimBody,
    PreviewBody,
    RejectBody,
    ReviewOut,
)
from edgesync.api._review_queries import (
    check_action_version,
    get_review,
    list_reviews,
    review_detail,
    review_out,
)
from edgesync.api._search import MAX_SEARCH, SearchText
from edgesync.store import Conn

__all__ = ["router"]

router = APIRouter(prefix="/core/api/v1/projects/{project_id}/edge/schema-reviews",
                   tags=["schema reviews"])
ReviewId = Annotated[uuid.UUID, Path(description="schema review UUID")]
_READ_ERRORS = error_responses(400, 401, 404, 422)
_WRITE_ERRORS = error_responses(400, 401, 403, 404, 409, 422)


@router.get("", response_model=Page[ReviewOut], responses=_READ_ERRORS,
            summary="List schema reviews")
async def list_(
    access: CanRead, conn: Db, paging: Paging,
    status: Annotated[governance.ReviewStatus | Literal["open"] | None, Query(
        description="a status, or open: queued or in review")] = None,
    lineage_id: Annotated[uuid.UUID | None, Query()] = None,
    device_id: Annotated[uuid.UUID | None, Query(description="only this device's")] = None,
    device_name: Annotated[str | None, Query(
        min_length=1, max_length=128, description="only the device of this name's")] = None,
    q: Annotated[SearchText, Query(
        max_length=MAX_SEARCH,
        description="only reviews whose device name, source table, "
                    "classification, claimer or decider contains this "
                    "(any case)")] = None,
) -> Page[ReviewOut]:
    items, total = await list_reviews(conn, access.project_id, status=status,
                                      lineage_id=lineage_id, device_id=device_id,
                                      device_name=device_name, offset=paging.offset,
                                      limit=paging.limit, q=q)
    return paging.of(items, total)


@router.get("/{review_id}", response_model=Item[ReviewOut], responses=_READ_ERRORS,
            summary="Schema review detail")
async def detail(access: CanRead, conn: Db, review_id: ReviewId) -> Item[ReviewOut]:
    return Item[ReviewOut](data=await review_detail(
        conn, await get_review(conn, access.project_id, review_id)))


@router.post("/{review_id}/claim", response_model=Item[ReviewOut], responses=_WRITE_ERRORS,
             summary="queued → in_review")
async def claim(access: CanManage, conn: Db, request: Request, review_id: ReviewId,
                body: ClaimBody, idempotency_key: IdempotencyKey = None) -> Response:
    async def work(tx: Conn) -> tuple[int, Item[ReviewOut]]:
        check_action_version(await get_review(tx, access.project_id, review_id),
                             body.action_version)
        result = await governance.claim_review(tx, review_id, actor=access.actor,
                                               action_version=body.action_version)
        return 200, Item[ReviewOut](data=review_out(result))

    return await idempotent(conn, access, request, idempotency_key, work)


@router.post("/{review_id}/approve", response_model=Item[ReviewOut], responses=_WRITE_ERRORS,
             summary="queued | in_review → approved: bind columns, provision the target, "
                     "replay (a refusal changes nothing and lists every refused column)")
async def approve(access: CanManage, conn: Db, request: Request, review_id: ReviewId,
                  body: ApproveBody, idempotency_key: IdempotencyKey = None) -> Response:
    actions = (None if body.column_actions is None else
               [a.model_dump(exclude_none=True) for a in body.column_actions])

    async def work(tx: Conn) -> tuple[int, Item[ReviewOut]]:
        check_action_version(await get_review(tx, access.project_id, review_id),
                             body.action_version)
        result = await operations.approve_review(tx, review_id, actor=access.actor,
                                                 action_version=body.action_version,
                                                 column_actions=actions,
                                                 sync_authority=body.sync_authority)
        return 200, Item[ReviewOut](data=review_out(result))

    return await idempotent(conn, access, request, idempotency_key, work)


@router.post("/{review_id}/reject", response_model=Item[ReviewOut], responses=_WRITE_ERRORS,
             summary="queued | in_review → rejected (the lineage stays paused)")
async def reject(access: CanManage, conn: Db, request: Request, review_id: ReviewId,
                 body: RejectBody, idempotency_key: IdempotencyKey = None) -> Response:
    async def work(tx: Conn) -> tuple[int, Item[ReviewOut]]:
        check_action_version(await get_review(tx, access.project_id, review_id),
                             body.action_version)
        result = await operations.reject_review(tx, review_id, actor=access.actor,
                                                action_version=body.action_version,
                                                reason=body.reason)
        return 200, Item[ReviewOut](data=review_out(result))

    return await idempotent(conn, access, request, idempotency_key, work)


@router.post("/{review_id}/preview", response_model=Item[ApprovalPreview],
             responses=_READ_ERRORS,
             summary="What an approval with these column actions would give (changes nothing)")
async def preview(access: CanRead, conn: Db, review_id: ReviewId,
                  body: PreviewBody) -> Item[ApprovalPreview]:
    """Validates the actions as ``approve`` does and describes the target; it needs only
    read access and no ``Idempotency-Key``, since nothing is stored."""
    review = await get_review(conn, access.project_id, review_id)
    actions = (None if body.column_actions is None else
               [a.model_dump(exclude_none=True) for a in body.column_actions])
    return Item[ApprovalPreview](data=await preview_review(conn, access.project_id, review,
                                                           actions))
