"""Schema reviews as the API sees them: always through their lineage's project."""

from __future__ import annotations

import uuid

from edgesync import governance
from edgesync.api._domain import model_of
from edgesync.api._errors import ApiError
from edgesync.api._review_models import ReviewOut
from edgesync.errors import ApiErrorCode, NotFoundError
from edgesync.store import Conn

__all__ = ["OPEN", "OPEN_STATUSES", "check_action_version", "get_review", "list_reviews",
           "review_detail", "review_out"]

# ``q`` (``$6``): a case-insensitive substring of the device name, source table,
# classification or who claimed or decided, so a console's search covers every page.
_FROM = """
FROM edge_schema_reviews r
JOIN edge_table_lineages l ON l.id = r.lineage_id
JOIN edge_devices d ON d.id = l.device_id
JOIN edge_schema_versions v ON v.id = r.schema_version_id
WHERE l.project_id = $1 AND ($2::text[] IS NULL OR r.status = ANY($2::text[]))
  AND ($3::uuid IS NULL OR r.lineage_id = $3) AND ($4::uuid IS NULL OR l.device_id = $4)
  AND ($5::text IS NULL OR d.name = $5)
  AND ($6::text IS NULL OR strpos(lower(concat_ws(' ', d.name, l.source_table,
       r.classification, r.claimed_by, r.decided_by)), lower($6)) > 0)
"""


def review_out(review: governance.Review) -> ReviewOut:
    return model_of(ReviewOut, review)


async def review_detail(conn: Conn, review: governance.Review) -> ReviewOut:
    """A review with, while it is open, the column actions suggested for it."""
    if review.status not in (governance.ReviewStatus.QUEUED,
                             governance.ReviewStatus.IN_REVIEW):
        return review_out(review)
    suggested = await governance.suggest_for_review(conn, review.lineage_id, review.columns)
    approved = await conn.fetchval(
        "SELECT v.schema_columns FROM edge_table_lineages l JOIN edge_schema_versions v "
        "ON v.lineage_id = l.id AND v.schema_hash = l.approved_schema_hash WHERE l.id = $1",
        review.lineage_id)
    return model_of(ReviewOut, review, suggested_column_actions=[s.as_json() for s in suggested],
                    approved_schema_columns=(approved or {}).get("columns"))


def review_not_found() -> ApiError:
    return ApiError(404, ApiErrorCode.REVIEW_NOT_FOUND, "schema review not found")


# ``status=open``: what waits for an operator (the console's and the TUI's default).
OPEN = "open"
OPEN_STATUSES = (governance.ReviewStatus.QUEUED.value, governance.ReviewStatus.IN_REVIEW.value)


async def list_reviews(conn: Conn, project_id: uuid.UUID, *, status: str | None,
                       lineage_id: uuid.UUID | None, offset: int, limit: int,
                       device_id: uuid.UUID | None = None, device_name: str | None = None,
                       q: str | None = None) -> tuple[list[ReviewOut], int]:
    statuses = (None if status is None else list(OPEN_STATUSES) if status == OPEN
                else [status])
    args = (project_id, statuses, lineage_id, device_id, device_name, q)
    total = await conn.fetchval("SELECT count(*)" + _FROM, *args)
    rows = await conn.fetch(
        "SELECT r.*, l.project_id, l.device_id, d.name AS device_name, l.source_table, "
        "v.schema_columns, v.diff" + _FROM + "ORDER BY r.created_at, r.id OFFSET $7 LIMIT $8",
        *args, offset, limit)
    return [review_out(governance.Review.from_record(r)) for r in rows], int(total)


async def get_review(conn: Conn, project_id: uuid.UUID, review_id: uuid.UUID
                     ) -> governance.Review:
    try:
        review = await governance.get_review(conn, review_id)
    except NotFoundError:
        raise review_not_found() from None
    if review.project_id != project_id:
        raise review_not_found()
    return review


def check_action_version(review: governance.Review | governance.RegistryReview,
                         action_version: int) -> None:
    """Answer a stale action_version with its own code before governance re-checks it
    under the row lock (where a lost race is still a 409)."""
    if review.action_version != action_version:
        raise ApiError(409, ApiErrorCode.ACTION_VERSION_CONFLICT,
                       f"the review is at action_version {review.action_version}, not "
                       f"{action_version}: reload it and try again", "action_version")
