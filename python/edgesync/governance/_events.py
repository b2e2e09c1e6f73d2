"""Governance events: stored, then announced with NOTIFY for live followers."""

from __future__ import annotations

import enum
import uuid
from typing import Any

import orjson

from edgesync.store import Conn

__all__ = ["EVENT_CHANNEL", "EventType", "emit"]

EVENT_CHANNEL = "edge_events"


class EventType(enum.StrEnum):
    """Every event ``emit`` records (``edge_events.event_type``, the event stream's
    ``type``): the reference's ``integration.…`` events and edgesync's own."""

    SCHEMA_REVIEW_QUEUED = "integration.edge_schema_review.queued.v1"
    SCHEMA_REVIEW_APPROVED = "integration.edge_schema_review.approved.v1"
    SCHEMA_REVIEW_REJECTED = "integration.edge_schema_review.rejected.v1"
    REGISTRY_REVIEW_QUEUED = "integration.edge_registry_review.queued.v1"
    REGISTRY_REVIEW_APPROVED = "integration.edge_registry_review.approved.v1"
    REGISTRY_REVIEW_REJECTED = "integration.edge_registry_review.rejected.v1"
    REGISTRY_REVIEW_ABANDONED = "integration.edge_registry_review.abandoned.v1"
    LINEAGE_PAUSED = "integration.edge_table_lineage.ingestion_paused.v1"
    LINEAGE_RESUMED = "integration.edge_table_lineage.ingestion_resumed.v1"
    LINEAGE_CONSOLIDATED = "integration.edge_table_lineage.consolidated.v1"
    MATERIALIZATION_FAILED = "integration.edge_export_segment.materialization_failed.v1"
    LINEAGE_DELETED = "edgesync.table_lineage.deleted.v1"
    CAPTURE_GAP_REPORTED = "edgesync.capture_gap.reported.v1"
    REPLAY_COMPLETED = "edgesync.replay.completed.v1"
    STAGED_ROWS_DISCARDED = "edgesync.staged_rows.discarded.v1"
    REJECTED_ROWS_REBOUND = "edgesync.rejected_rows.rebound.v1"
    SYNC_AUTHORITY_CHANGED = "edgesync.table_lineage.sync_authority_changed.v1"
    ROWS_QUARANTINED = "edgesync.rows.quarantined.v1"
    QUARANTINED_ROW_RETRIED = "edgesync.quarantined_row.retried.v1"
    QUARANTINED_ROWS_RETRIED = "edgesync.quarantined_rows.retried.v1"
    QUARANTINED_ROWS_DISCARDED = "edgesync.quarantined_rows.discarded.v1"
    RESNAPSHOT_REQUESTED = "edgesync.resnapshot.requested.v1"
    RESNAPSHOT_FINISHED = "edgesync.resnapshot.finished.v1"
    VERIFICATION_REQUESTED = "edgesync.verification.requested.v1"
    VERIFICATION_FINISHED = "edgesync.verification.finished.v1"


async def emit(conn: Conn, project_id: uuid.UUID, event_type: EventType,
               subject_id: uuid.UUID | None, body: dict[str, Any]) -> None:
    """Record an event in the caller's transaction (it is visible only if that commits)."""
    event_id = await conn.fetchval(
        "INSERT INTO edge_events (project_id, event_type, subject_id, body) "
        "VALUES ($1, $2, $3, $4) RETURNING id",
        project_id, event_type, subject_id, body)
    await conn.execute("SELECT pg_notify($1, $2)", EVENT_CHANNEL,
                       orjson.dumps({"id": event_id, "type": event_type}).decode())
