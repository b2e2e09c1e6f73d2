"""The operator review workflow: queued → in_review → approved | rejected | abandoned.

Every transition names the ``action_version`` the operator last saw; a stale one
is a conflict rather than a silent overwrite of someone else's decision.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from edgesync.errors import ConflictError, InvalidRequestError, NotFoundError
from edgesync.governance._approval_check import check_approval, refused
from edgesync.governance._bindings import approve_schema, device_target
from edgesync.governance._classify import Classification
from edgesync.governance._events import EventType, emit
from edgesync.governance._lineages import (
    PauseReason,
    SyncAuthority,
    get_lineage_for_update,
    set_sync_authority,
)
from edgesync.governance._review_queue import record_transition, reopen_device_review
from edgesync.governance._statuses import ReviewStatus, SchemaStatus
from edgesync.governance._versions import set_status
from edgesync.materialize import StateTarget
from edgesync.protocol import Pipeline
from edgesync.store import Conn, from_record

__all__ = ["Review", "approve_review", "claim_review", "get_review", "list_reviews",
           "reject_review", "reopen_review"]

_REVIEW_SQL = """
SELECT r.*, l.project_id, l.device_id, d.name AS device_name, l.source_table,
       v.schema_columns, v.diff
FROM edge_schema_reviews r
JOIN edge_table_lineages l ON l.id = r.lineage_id
JOIN edge_devices d ON d.id = l.device_id
JOIN edge_schema_versions v ON v.id = r.schema_version_id
"""


@dataclass(frozen=True, slots=True)
class Review:
    """A device schema review with its lineage's device and table (``_REVIEW_SQL``)."""

    id: uuid.UUID
    lineage_id: uuid.UUID
    schema_version_id: uuid.UUID
    project_id: uuid.UUID
    device_id: uuid.UUID
    device_name: str
    source_table: str
    schema_hash: str
    classification: Classification
    status: ReviewStatus
    action_version: int
    claimed_by: str | None
    decided_by: str | None
    decision_reason: str | None
    # JSON documents, echoed as stored: the decision (``ColumnAction.as_json`` each), the
    # classification's diff (``SchemaDiff.as_json``) and the columns as the device sent
    # them (``{"table_name", "columns": [...]}``, None until a batch carried them).
    column_actions: list[dict[str, Any]] | None
    diff: dict[str, Any]
    schema_columns: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_record(cls, rec: asyncpg.Record) -> Review:
        return from_record(cls, rec, status=ReviewStatus(rec["status"]),
                           classification=Classification(rec["classification"]))

    @property
    def columns(self) -> list[dict[str, Any]]:
        """The schema's column documents (empty until the device sent them)."""
        return list((self.schema_columns or {}).get("columns") or [])


async def list_reviews(conn: Conn, *, project_id: uuid.UUID | None = None,
                       status: str | None = None) -> list[Review]:
    rows = await conn.fetch(
        _REVIEW_SQL + "WHERE ($1::uuid IS NULL OR l.project_id = $1) "
        "AND ($2::text IS NULL OR r.status = $2) ORDER BY r.created_at",
        project_id, status)
    return [Review.from_record(r) for r in rows]


async def get_review(conn: Conn, review_id: uuid.UUID, *,
                     for_update: bool = False) -> Review:
    row = await conn.fetchrow(_REVIEW_SQL + "WHERE r.id = $1"
                              + (" FOR UPDATE OF r" if for_update else ""), review_id)
    if row is None:
        raise NotFoundError(f"schema review {review_id} not found")
    return Review.from_record(row)


def _check(review: Review, action_version: int, allowed: tuple[str, ...]) -> None:
    if review.action_version != action_version:
        raise ConflictError(
            f"review {review.id} is at action_version {review.action_version}, "
            f"not {action_version}: reload it and try again")
    if review.status not in allowed:
        raise ConflictError(
            f"review {review.id} is {review.status}; this needs {' or '.join(allowed)}")


async def _transition(conn: Conn, review: Review, status: ReviewStatus,
                      actor: str, **fields: Any) -> Review:
    await record_transition(conn, "device", review.id, status, actor, **fields)
    return await get_review(conn, review.id)


async def claim_review(conn: Conn, review_id: uuid.UUID, *, actor: str,
                       action_version: int) -> Review:
    async with conn.transaction():
        review = await get_review(conn, review_id, for_update=True)
        _check(review, action_version, (ReviewStatus.QUEUED,))
        return await _transition(conn, review, ReviewStatus.IN_REVIEW, actor, claimed_by=actor)


async def approve_review(conn: Conn, review_id: uuid.UUID, *, actor: str,
                         action_version: int, column_actions: list[dict[str, Any]] | None,
                         sync_authority: SyncAuthority | str | None = None) -> Review:
    """Approve with per-column actions (``None`` mirrors every column). ``sync_authority``
    ``cloud_authoritative`` lets the cloud write rows back to a state table.

    A ``queued`` review at ``action_version`` is claimed and approved in this one
    transaction (the reference's claim-then-approve still works): a refused approval
    (``ApprovalRefused``, every refusal of ``check_approval``) leaves it exactly as it was,
    where a separate claim would have moved it to ``in_review`` for nothing."""
    if sync_authority is not None and sync_authority not in tuple(SyncAuthority):
        raise InvalidRequestError(
            "sync_authority", "must be device_authoritative or cloud_authoritative")
    authority = None if sync_authority is None else SyncAuthority(sync_authority)
    if column_actions is not None and not isinstance(column_actions, list):
        raise InvalidRequestError("column_actions", "must be a list")
    async with conn.transaction():
        review = await get_review(conn, review_id, for_update=True)
        _check(review, action_version, (ReviewStatus.QUEUED, ReviewStatus.IN_REVIEW))
        if not review.schema_columns:
            raise ConflictError(
                "the device has not sent this schema's columns yet (schema_columns); "
                "it cannot be approved until a batch carrying them arrives")
        columns = list(review.schema_columns["columns"])
        lineage = await get_lineage_for_update(conn, review.lineage_id)
        assert lineage is not None
        if authority == SyncAuthority.CLOUD and lineage.pipeline != Pipeline.ROWS:
            raise InvalidRequestError("sync_authority",
                                      "only state (rows) tables can be cloud-authoritative")
        checked = await check_approval(
            conn, project_id=lineage.project_id, pipeline=lineage.pipeline,
            table=device_target(lineage), columns=columns, column_actions=column_actions,
            registry=False, lineage_ids=[lineage.id])
        if checked.refusals:
            raise refused(checked.refusals)
        actions = checked.actions
        if review.status == ReviewStatus.QUEUED:
            await record_transition(conn, "device", review.id, ReviewStatus.IN_REVIEW, actor,
                                    claimed_by=actor)
        await approve_schema(conn, lineage, review.schema_version_id, review.schema_hash,
                             columns, actions, review.id)
        if authority is not None:
            await set_sync_authority(conn, lineage.id, authority)
            if authority == SyncAuthority.CLOUD:
                table = await conn.fetchval(
                    "SELECT target_table FROM edge_table_lineages WHERE id = $1", lineage.id)
                await StateTarget(table, []).provision_cloud_authority(conn)
        result = await _transition(
            conn, review, ReviewStatus.APPROVED, actor,
            column_actions=[a.as_json() for a in actions])
        await emit(conn, lineage.project_id, EventType.SCHEMA_REVIEW_APPROVED,
                   review.id, {"review_id": str(review.id),
                                "lineage_id": str(lineage.id)})
        return result


async def reject_review(conn: Conn, review_id: uuid.UUID, *, actor: str,
                        action_version: int, reason: str | None) -> Review:
    """Reject: the lineage stays paused. Its rows staged under the rejected version stay
    staged; the caller labels them ``schema_rejected`` in the same transaction
    (``staging.label_schema_rejected``: staging owns them and sits above governance)."""
    async with conn.transaction():
        review = await get_review(conn, review_id, for_update=True)
        _check(review, action_version, (ReviewStatus.QUEUED, ReviewStatus.IN_REVIEW))
        await set_status(conn, review.schema_version_id, SchemaStatus.REJECTED)
        result = await _transition(conn, review, ReviewStatus.REJECTED, actor,
                                   decision_reason=reason)
        await emit(conn, review.project_id, EventType.SCHEMA_REVIEW_REJECTED,
                   review.id, {"review_id": str(review.id), "reason": reason})
        return result


async def reopen_review(conn: Conn, lineage_id: uuid.UUID, *, actor: str) -> Review:
    """A new review of the lineage's approved schema, for a lineage an approval with
    ``defer`` columns left paused (``deferred_columns``): approving it without defers
    resumes the lineage and replays what was staged meanwhile."""
    async with conn.transaction():
        lineage = await get_lineage_for_update(conn, lineage_id)
        if lineage is None:
            raise NotFoundError(f"lineage {lineage_id} not found")
        if lineage.pause_reason != PauseReason.DEFERRED_COLUMNS:
            raise ConflictError(f"lineage {lineage_id} has no deferred columns to decide")
        version = await conn.fetchrow(
            "SELECT id, classification FROM edge_schema_versions "
            "WHERE lineage_id = $1 AND schema_hash = $2", lineage.id, lineage.approved_schema_hash)
        assert version is not None and lineage.approved_schema_hash is not None
        review_id = await reopen_device_review(conn, lineage.id, version["id"],
                                               lineage.approved_schema_hash,
                                               version["classification"])
        if review_id is None:
            raise ConflictError(f"lineage {lineage_id} already has an open review")
        await emit(conn, lineage.project_id, EventType.SCHEMA_REVIEW_QUEUED,
                   review_id, {"review_id": str(review_id), "lineage_id": str(lineage.id),
                               "schema_hash": lineage.approved_schema_hash,
                               "reopened_by": actor})
        return await get_review(conn, review_id)
