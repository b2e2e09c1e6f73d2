"""Request and response models of the registry, coalesced mirror and data point routes."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from edgesync.api._review_models import ColumnActionIn, SuggestedAction, _Body
from edgesync.fleet import CoalescingMode
from edgesync.governance import ReviewStatus, SchemaStatus
from edgesync.protocol import Pipeline

__all__ = ["CoalescedMirrorOut", "ConsolidatedLineageOut", "ConsolidationOut", "DataPointIn",
           "DataPointOut", "DataPointValueOut",
           "RegistryApproveBody", "RegistryDevice", "RegistryEntryDetail", "RegistryEntryOut",
           "RegistryReasonBody", "RegistryReviewDetail", "RegistryReviewOut",
           "SkippedLineageOut"]

Scope = Literal[CoalescingMode.PROJECT, CoalescingMode.FLEET]
PipelineWord = Literal[Pipeline.ROWS, Pipeline.TELEMETRY]
ValueType = Literal["integer", "real", "numeric", "text", "boolean", "blob", "json"]


class RegistryDevice(BaseModel):
    lineage_id: uuid.UUID
    device_id: uuid.UUID
    status: str = Field(description="the device's schema version: pending, approved, rejected")


class RegistryEntryOut(BaseModel):
    id: uuid.UUID
    project_id: uuid.UUID
    fleet_id: uuid.UUID | None = Field(description="set for fleet scope")
    scope: Scope
    pipeline: PipelineWord
    source_table: str
    schema_hash: str
    classification: str
    status: SchemaStatus
    target_table: str | None = Field(description="the coalesced target, once approved")
    column_actions: list[dict[str, Any]] | None
    device_count: int = Field(description="device schema versions linked to the entry")
    created_at: datetime
    updated_at: datetime


class RegistryEntryDetail(RegistryEntryOut):
    schema_columns: dict[str, Any] | None
    devices: list[RegistryDevice]


class RegistryReviewOut(BaseModel):
    id: uuid.UUID
    registry_id: uuid.UUID
    project_id: uuid.UUID
    fleet_id: uuid.UUID | None
    scope: Scope
    pipeline: PipelineWord
    source_table: str
    schema_hash: str
    classification: str
    status: ReviewStatus
    registry_status: str = Field(description="the registry entry's status")
    target_table: str | None
    action_version: int = Field(description="send this back with claim/approve/reject/abandon")
    claimed_by: str | None
    decided_by: str | None
    decision_reason: str | None
    column_actions: list[dict[str, Any]] | None
    created_at: datetime
    updated_at: datetime


class RegistryReviewDetail(RegistryReviewOut):
    schema_columns: dict[str, Any] | None = Field(
        description='{"table_name", "columns": [...]} as the devices sent them')
    devices: list[RegistryDevice] = Field(description="device lineages linked to the entry")
    suggested_column_actions: list[SuggestedAction] | None = Field(
        None, description="an open review only: the scope's last approved decision for the "
                          "table carried forward, one action per column (as for schema "
                          "reviews)")


class RegistryApproveBody(_Body):
    column_actions: list[ColumnActionIn] | None = Field(
        None, max_length=2000,
        description="one action per source column (defer is refused at registry scope); "
                    "omitted: mirror every column")


class RegistryReasonBody(_Body):
    reason: str | None = Field(None, max_length=2000)


class CoalescedMirrorOut(BaseModel):
    id: str = Field(description="the mirror's id: its target table name")
    target_table: str
    scope: Scope
    fleet_id: uuid.UUID | None
    pipeline: PipelineWord
    source_table: str
    schema_hashes: list[str] = Field(description="approved schema hashes writing to it")
    device_count: int = Field(description="device lineages writing to it")
    created_at: datetime


class ConsolidatedLineageOut(BaseModel):
    lineage_id: uuid.UUID
    device_id: uuid.UUID
    pipeline: PipelineWord
    schema_hash: str = Field(description="the lineage's approved schema, now bound to the "
                                         "registry entry's column actions")
    registry_id: uuid.UUID
    from_table: str = Field(description="the target it wrote to before")
    to_table: str = Field(description="the coalesced target it writes to now")
    rows_copied: int = Field(description="live rows written into the coalesced target "
                                         "(state: newer-wins; telemetry: appended)")
    tombstones_copied: int = Field(description="state: deleted rows (tombstones) written")
    old_table_kept: str | None = Field(
        description="the old table, kept with its rows (never dropped); null when the "
                    "lineage already wrote to the coalesced table and was only re-bound")


class SkippedLineageOut(BaseModel):
    lineage_id: uuid.UUID
    device_id: uuid.UUID
    pipeline: PipelineWord
    schema_hash: str | None = Field(description="the lineage's approved schema")
    target_table: str | None = Field(description="where it still writes")
    reason: Literal["schema_not_in_registry", "schema_review_open", "deferred_columns",
                    "cloud_authoritative", "device_in_no_fleet", "not_approved",
                    "copy_failed"]
    detail: str


class ConsolidationOut(BaseModel):
    source_table: str
    mode: Scope = Field(description="the project's coalescing mode")
    fleet_id: uuid.UUID | None = Field(description="the fleet consolidated (fleet route), "
                                                   "or null: the whole project")
    consolidated: list[ConsolidatedLineageOut] = Field(
        description="lineages moved by this call (empty on a repeated call)")
    skipped: list[SkippedLineageOut] = Field(
        description="lineages left where they are, and why (reported again on every call)")


class DataPointIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200, description="unique in the project")
    value_type: ValueType
    unit: str | None = Field(None, max_length=200)


class DataPointOut(BaseModel):
    id: uuid.UUID
    project_id: uuid.UUID
    name: str
    value_type: ValueType
    unit: str | None
    created_at: datetime


class DataPointValueOut(BaseModel):
    device_id: uuid.UUID
    ts: datetime = Field(description="telemetry: the row's event_ts; state: when the cloud "
                                     "applied the change")
    value: Any = Field(description="the JSON value (null for a NULL)")
    source_key: str
    source_version: str
