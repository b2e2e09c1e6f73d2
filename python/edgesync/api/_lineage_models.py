"""Response models of the lineage routes."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from edgesync import control
from edgesync.api._recovery_models import RecoveryOfferOut, RecoveryState
from edgesync.governance import LineageStatus, ReplayStatus, SyncAuthority
from edgesync.protocol import Pipeline

__all__ = ["Binding", "DeletedLineage", "LineageDetail", "LineageOut",
           "MaterializationState", "NextStep", "ReplayIntent", "ReplayProgress", "ResetResult",
           "SchemaVersion", "StagedRow"]


class LineageOut(BaseModel):
    id: uuid.UUID
    project_id: uuid.UUID
    device_id: uuid.UUID
    device_name: str
    fleet_id: uuid.UUID | None
    source_table: str
    pipeline: Literal[Pipeline.ROWS, Pipeline.TELEMETRY]
    status: LineageStatus
    pause_reason: str | None
    sync_authority: Literal[SyncAuthority.DEVICE, SyncAuthority.CLOUD]
    current_schema_hash: str | None
    approved_schema_hash: str | None
    target_table: str | None
    staged_rows: int
    staged_bytes: int
    materialized_rows: int
    rejected_batches: int
    materialization_errors: int
    last_error: str | None
    last_batch_at: datetime | None = Field(
        None, description="when the cloud received the lineage's latest batch (any outcome)")
    last_device_seen_at: datetime | None = Field(
        None, description="when the device's agent first saw the oldest change of the "
                          "lineage's latest committed batch that carried first_seen_at_ms "
                          "(null when the agent does not stamp batches)")
    last_committed_at: datetime | None = Field(
        None, description="when the lineage's latest batch committed (staged or "
                          "materialized) in the cloud")
    freshness_seconds: float | None = Field(
        None, description="that stamped batch's commit time - last_device_seen_at: its "
                          "end-to-end lag (negative: the device's clock is ahead)")
    created_at: datetime
    updated_at: datetime


class SchemaVersion(BaseModel):
    id: uuid.UUID
    schema_hash: str
    classification: str
    status: str
    diff: dict[str, Any]
    schema_columns: dict[str, Any] | None
    first_seen_at: datetime


class Binding(BaseModel):
    schema_hash: str
    source_column_name: str
    action: str
    mirror_column_name: str | None
    target_type: str | None
    device_data_point_id: uuid.UUID | None


class ReplayIntent(BaseModel):
    id: uuid.UUID
    review_id: uuid.UUID | None
    status: ReplayStatus
    rows_replayed: int
    last_error: str | None
    created_at: datetime
    completed_at: datetime | None


class ReplayProgress(BaseModel):
    pending_intents: int
    staged_batches: int = Field(description="staged batches still waiting (any reason)")
    staged_rows: int
    intents: list[ReplayIntent] = Field(description="the most recent replay intents, newest first")


class MaterializationState(BaseModel):
    error_count: int = Field(description="materialization errors since the last reset")
    last_error: str | None
    failed_batches: int = Field(description="staged batches held as materialization_failed")
    failed_rows: int
    quarantined_rows: int = Field(0, description="open quarantined rows (…/quarantine)")


class RetiredColumnOut(BaseModel):
    name: str = Field(description="the target column, kept with its last values")
    pg_type: str
    source_column_name: str = Field(description="the source column it was written from")
    retired_by_schema_hash: str = Field(description="the approval that stopped writing it")
    retired_at: datetime


class LineageDetail(LineageOut):
    schema_versions: list[SchemaVersion]
    bindings: list[Binding]
    retired_columns: list[RetiredColumnOut] = Field(
        default_factory=list,
        description="columns of the target an approval stopped writing (a column dropped, "
                    "renamed or retyped under a new name): kept, never updated again; keep "
                    "them, drop them by hand, or mirror a column to them again "
                    "(docs/governance.md)")
    target_rows: int | None = Field(
        None, description="the rows of this device in the target table now (live rows for a "
                          "state table, samples for telemetry); null before the target "
                          "exists. materialized_rows counts writes: an updated row again")
    replay: ReplayProgress
    materialization: MaterializationState
    recovery: RecoveryState = Field(default_factory=RecoveryState)
    recovery_offers: list[RecoveryOfferOut] = Field(
        default_factory=list, description="re-snapshots or verifications offered now, and "
                                          "why (docs/recovery.md); empty: nothing to do")


class StagedRow(BaseModel):
    model_config = ConfigDict(extra="allow")

    staged_id: int
    staging_reason: str
    schema_hash: str
    commit_seq: Any = Field(None, description="row batches: the change's commit_seq")
    op: Any = Field(None, description="row batches: insert, update or delete")
    pk: Any = Field(None, description="row batches: the primary key values")
    row: Any = Field(None, description="row batches: the row values (null for a delete); "
                                       "telemetry samples carry their columns at the top level")


class ResetResult(BaseModel):
    lineage_id: uuid.UUID
    requeued_batches: int = Field(description="materialization_failed batches made replayable")
    quarantined_rows: int = Field(0, description="open quarantined rows, left as they are "
                                                 "(retry them with …/quarantine/retry)")


class DiscardBody(BaseModel):
    """Which staged batches to discard: all (empty body), or narrowed by reason and/or
    schema version."""

    model_config = ConfigDict(extra="forbid")

    staging_reason: Literal["schema_review", "schema_rejected", "lineage_paused",
                            "materialization_failed"] | None = None
    schema_hash: str | None = Field(None, pattern=r"^[0-9a-f]{64}$",
                                    description="only batches staged under this version")


class DiscardResult(BaseModel):
    lineage_id: uuid.UUID
    discarded_batches: int
    discarded_rows: int


class NextStep(BaseModel):
    """What the operator should do next: the offer the re-created lineage's detail will
    make (``recovery_offers``) once it is back and approved."""

    action: control.RecoveryAction
    reason: control.OfferReason
    detail: str


class DeletedLineage(BaseModel):
    id: uuid.UUID
    deleted: bool = True
    device_id: uuid.UUID
    source_table: str
    forget_control_id: uuid.UUID = Field(
        description="the forget_lineage control queued for the device")
    device_will: control.AfterForget = Field(
        description="resend_table: the device resumes the table and sends its schema and "
                    "every current row again; its next batch re-creates the lineage (a new "
                    "id, under review)")
    next_step: NextStep | None = Field(
        description="what to do once the table is back (null for a telemetry lineage)")
    detail: str = Field(description="the same, in a sentence for a person")
