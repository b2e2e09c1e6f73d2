"""Registry reviews: ``queued → in_review → approved | rejected | abandoned``.

Same ``action_version`` rule as device reviews. Approving provisions the coalesced
target and approves every device lineage waiting on the hash (each gets bindings and
a replay intent, in this one transaction). Rejecting leaves them paused and staging.
Abandoning gives up on the registry path for this hash: each waiting device gets its
own device review, and so does any device that sends the hash later.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from edgesync.errors import ConflictError, InvalidRequestError, NotFoundError
from edgesync.governance._approval_check import check_approval, refused
from edgesync.governance._bindings import approve_schema, provision_target
from edgesync.governance._classify import Classification
from edgesync.governance._events import EventType, emit
from edgesync.governance._lineages import Lineage
from edgesync.governance._mapping import resolve_mapped
from edgesync.governance._registry import (
    coalesced_table_name,
    registry_columns,
    set_entry_decision,
    set_entry_status,
)
from edgesync.governance._review_queue import open_device_review, record_transition
from edgesync.governance._statuses import ReviewStatus, SchemaStatus
from edgesync.governance._versions import detach_waiting, reject_waiting
from edgesync.protocol import Pipeline
from edgesync.store import Conn, from_record

__all__ = ["RegistryReview", "abandon_registry_review", "approve_registry_review",
           "claim_registry_review", "get_registry_review", "list_registry_reviews",
           "reject_registry_review"]

# The event of each decision (a claim emits none).
_DECISION_EVENTS = {ReviewStatus.APPROVED: EventType.REGISTRY_REVIEW_APPROVED,
                    ReviewStatus.REJECTED: EventType.REGISTRY_REVIEW_REJECTED,
                    ReviewStatus.ABANDONED: EventType.REGISTRY_REVIEW_ABANDONED}

_SQL = """
SELECT rr.*, r.fleet_id, r.scope, r.pipeline, r.source_table, r.schema_hash, r.classification,
       r.status AS registry_status, r.target_table
FROM edge_registry_reviews rr JOIN edge_schema_registry r ON r.id = rr.registry_id
"""


@dataclass(frozen=True, slots=True)
class RegistryReview:
    """A registry review with the entry it decides (``_SQL``)."""

    id: uuid.UUID
    registry_id: uuid.UUID
    project_id: uuid.UUID
    fleet_id: uuid.UUID | None  # set for fleet scope
    scope: str  # project | fleet
    pipeline: Pipeline
    source_table: str
    schema_hash: str
    classification: Classification
    status: ReviewStatus
    registry_status: SchemaStatus  # the entry's
    target_table: str | None  # the coalesced target, once approved
    action_version: int
    claimed_by: str | None
    decided_by: str | None
    decision_reason: str | None
    # JSON, as stored: the decision's column actions (``ColumnAction.as_json`` each).
    column_actions: list[dict[str, Any]] | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_record(cls, rec: asyncpg.Record) -> RegistryReview:
        return from_record(cls, rec, status=ReviewStatus(rec["status"]),
                           registry_status=SchemaStatus(rec["registry_status"]),
                           pipeline=Pipeline(rec["pipeline"]),
                           classification=Classification(rec["classification"]))


# ``q`` (``$4``): a case-insensitive substring of the source or target table, schema hash,
# classification, who claimed or decided, the decision's reason, or the name of a device
# linked to the entry (the waiting devices), so a console's search covers every page.
# strpos, not LIKE: ``%`` and ``_`` in the text are themselves, never wildcards.
_SEARCH = """
AND ($4::text IS NULL OR strpos(lower(concat_ws(' ', r.source_table, r.target_table,
       r.schema_hash, r.classification, rr.claimed_by, rr.decided_by, rr.decision_reason)),
       lower($4)) > 0
     OR EXISTS (SELECT 1 FROM edge_schema_versions v
                JOIN edge_table_lineages l ON l.id = v.lineage_id
                JOIN edge_devices d ON d.id = l.device_id
                WHERE v.registry_id = r.id AND strpos(lower(d.name), lower($4)) > 0))
"""


async def list_registry_reviews(conn: Conn, project_id: uuid.UUID, *,
                                status: str | None = None, fleet_id: uuid.UUID | None = None,
                                q: str | None = None) -> list[RegistryReview]:
    rows = await conn.fetch(
        _SQL + "WHERE rr.project_id = $1 AND ($2::text IS NULL OR rr.status = $2) "
        "AND ($3::uuid IS NULL OR r.fleet_id = $3)" + _SEARCH + "ORDER BY rr.created_at, rr.id",
        project_id, status, fleet_id, q or None)
    return [RegistryReview.from_record(r) for r in rows]


async def get_registry_review(conn: Conn, review_id: uuid.UUID, *,
                              project_id: uuid.UUID | None = None) -> RegistryReview:
    row = await conn.fetchrow(_SQL + "WHERE rr.id = $1 AND ($2::uuid IS NULL "
                              "OR rr.project_id = $2)", review_id, project_id)
    if row is None:
        raise NotFoundError(f"registry review {review_id} not found")
    return RegistryReview.from_record(row)


async def _locked(conn: Conn, review_id: uuid.UUID, project_id: uuid.UUID | None,
                  action_version: int, allowed: tuple[str, ...]) -> RegistryReview:
    """Lock the registry entry first (admissions hold it FOR SHARE), then the review."""
    review = await get_registry_review(conn, review_id, project_id=project_id)
    await conn.execute("SELECT 1 FROM edge_schema_registry WHERE id = $1 FOR UPDATE",
                       review.registry_id)
    await conn.execute("SELECT 1 FROM edge_registry_reviews WHERE id = $1 FOR UPDATE",
                       review_id)
    review = await get_registry_review(conn, review_id)
    if review.action_version != action_version:
        raise ConflictError(
            f"registry review {review_id} is at action_version {review.action_version}, "
            f"not {action_version}: reload it and try again")
    if review.status not in allowed:
        raise ConflictError(f"registry review {review_id} is {review.status}; "
                            f"this needs {' or '.join(allowed)}")
    return review


async def _transition(conn: Conn, review: RegistryReview, status: ReviewStatus, actor: str,
                      **fields: Any) -> RegistryReview:
    await record_transition(conn, "registry", review.id, status, actor, **fields)
    if status in _DECISION_EVENTS:
        await set_entry_status(conn, review.registry_id, status)
        await emit(conn, review.project_id, _DECISION_EVENTS[status],
                   review.id, {"review_id": str(review.id),
                               "registry_id": str(review.registry_id), **{
                                   k: v for k, v in fields.items() if k == "decision_reason"}})
    return await get_registry_review(conn, review.id)


async def claim_registry_review(conn: Conn, review_id: uuid.UUID, *, actor: str,
                                action_version: int,
                                project_id: uuid.UUID | None = None) -> RegistryReview:
    async with conn.transaction():
        review = await _locked(conn, review_id, project_id, action_version,
                               (ReviewStatus.QUEUED,))
        return await _transition(conn, review, ReviewStatus.IN_REVIEW, actor, claimed_by=actor)


async def _waiting_versions(conn: Conn, registry_id: uuid.UUID) -> list[asyncpg.Record]:
    """The pending device versions of the entry (``id``, ``lineage_id``)."""
    return await conn.fetch(
        "SELECT id, lineage_id FROM edge_schema_versions WHERE registry_id = $1 "
        "AND status = 'pending' ORDER BY first_seen_at", registry_id)


async def approve_registry_review(conn: Conn, review_id: uuid.UUID, *, actor: str,
                                  action_version: int,
                                  column_actions: list[dict[str, Any]] | None,
                                  project_id: uuid.UUID | None = None) -> RegistryReview:
    """Approve at registry scope (``None`` mirrors every column): provision the coalesced
    target and approve every waiting device lineage, in one transaction. A ``queued``
    review is claimed in the same transaction (as for device reviews), so a refused
    approval (``ApprovalRefused``) leaves it as it was."""
    if column_actions is not None and not isinstance(column_actions, list):
        raise InvalidRequestError("column_actions", "must be a list")
    async with conn.transaction():
        review = await _locked(conn, review_id, project_id, action_version,
                               (ReviewStatus.QUEUED, ReviewStatus.IN_REVIEW))
        columns = await registry_columns(conn, review.registry_id)
        if not columns:
            raise ConflictError("no device has sent this schema's columns yet (schema_columns); "
                                "it cannot be approved until a batch carrying them arrives")
        scope_id = review.fleet_id or review.project_id
        table = coalesced_table_name(review.pipeline, review.scope, scope_id,
                                     review.source_table)
        waiting = await _waiting_versions(conn, review.registry_id)
        checked = await check_approval(
            conn, project_id=review.project_id, pipeline=review.pipeline, table=table,
            columns=columns, column_actions=column_actions, registry=True,
            lineage_ids=[v["lineage_id"] for v in waiting])
        if checked.refusals:
            raise refused(checked.refusals)
        if review.status == ReviewStatus.QUEUED:
            await record_transition(conn, "registry", review.id, ReviewStatus.IN_REVIEW,
                                    actor, claimed_by=actor)
        mirrors, actions = checked.mirrors, checked.actions
        # Data points are resolved (auto-created) once; devices inherit the decision.
        actions = await resolve_mapped(conn, review.project_id, columns, actions)
        await provision_target(conn, review.pipeline, table, mirrors)
        await set_entry_decision(conn, review.registry_id, table,
                                 [a.as_json() for a in actions])
        for version in waiting:
            row = await conn.fetchrow(
                "SELECT * FROM edge_table_lineages WHERE id = $1 FOR UPDATE SKIP LOCKED",
                version["lineage_id"])
            if row is None:
                continue  # mid-admission: it will find the entry approved and follow
            await approve_schema(conn, Lineage.from_record(row), version["id"],
                                 review.schema_hash, columns, actions, None,
                                 coalesced_target=table, registry_review_id=review.id)
        return await _transition(conn, review, ReviewStatus.APPROVED, actor,
                                 column_actions=[a.as_json() for a in actions])


async def reject_registry_review(conn: Conn, review_id: uuid.UUID, *, actor: str,
                                 action_version: int, reason: str | None,
                                 project_id: uuid.UUID | None = None) -> RegistryReview:
    """Reject the hash for the whole scope: waiting lineages stay paused and staging, and
    so will devices that send it later."""
    async with conn.transaction():
        review = await _locked(conn, review_id, project_id, action_version,
                               (ReviewStatus.QUEUED, ReviewStatus.IN_REVIEW))
        await reject_waiting(conn, review.registry_id)
        return await _transition(conn, review, ReviewStatus.REJECTED, actor,
                                 decision_reason=reason)


async def abandon_registry_review(conn: Conn, review_id: uuid.UUID, *, actor: str,
                                  action_version: int, reason: str | None = None,
                                  project_id: uuid.UUID | None = None) -> RegistryReview:
    """Give the hash back to per-device reviews: each waiting lineage gets a device review
    (still paused, rows still staged)."""
    async with conn.transaction():
        review = await _locked(conn, review_id, project_id, action_version,
                               (ReviewStatus.QUEUED, ReviewStatus.IN_REVIEW))
        rows = await detach_waiting(conn, review.registry_id)
        for r in rows:
            await open_device_review(conn, review.project_id, r["lineage_id"], r["id"],
                                     review.schema_hash, r["classification"])
        return await _transition(conn, review, ReviewStatus.ABANDONED, actor,
                                 decision_reason=reason)
