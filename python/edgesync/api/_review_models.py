"""Request and response models of the schema review routes."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from edgesync.governance import ColumnActionKind, ReviewStatus, SuggestionKind, SyncAuthority

__all__ = ["ApproveBody", "ClaimBody", "ColumnActionIn", "PreviewBody", "RejectBody",
           "ReviewOut", "SuggestedAction"]


class SuggestedAction(BaseModel):
    """A column action proposed for an open review, from the previous approval's."""

    source_column_name: str
    action: str
    mirror_column_name: str | None = None
    target_type: str | None = None
    device_data_point_id: uuid.UUID | None = None
    data_point_name: str | None = None
    suggestion: SuggestionKind = Field(
        description="carried: the previous approval's decision; new: a column it did not "
                    "have; needs_decision: a proposal to look at (e.g. a changed type)")
    reason: str


class ReviewOut(BaseModel):
    id: uuid.UUID
    lineage_id: uuid.UUID
    schema_version_id: uuid.UUID
    device_id: uuid.UUID
    device_name: str | None = Field(None, description="the device's name")
    source_table: str
    schema_hash: str
    classification: str
    status: ReviewStatus
    action_version: int = Field(description="send this back with claim/approve/reject")
    claimed_by: str | None
    decided_by: str | None
    decision_reason: str | None
    column_actions: list[dict[str, Any]] | None
    diff: dict[str, Any]
    schema_columns: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    approved_schema_columns: list[dict[str, Any]] | None = Field(
        None, description="detail of an open review only: the columns of the lineage's "
                          "approved schema the diff compares against (a type change's old "
                          "affinity); null before the first approval")
    suggested_column_actions: list[SuggestedAction] | None = Field(
        None, description="detail of an open review only: one action per column, the "
                          "previous approved version's decisions carried forward; send them "
                          "as column_actions (omitting column_actions still mirrors every "
                          "column)")


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action_version: StrictInt = Field(ge=1, le=2**31 - 1,
                                      description="the review's action_version you last saw")


class ClaimBody(_Body):
    pass


class ColumnActionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source_column_name: str = Field(min_length=1, max_length=1000)
    action: Literal[ColumnActionKind.MIRROR, ColumnActionKind.MAP, ColumnActionKind.IGNORE,
                    ColumnActionKind.DEFER, ColumnActionKind.AUTO_CREATE_AND_MAP]
    mirror_column_name: str | None = Field(None, min_length=1, max_length=1000)
    target_type: Literal["bigint", "double precision", "numeric", "text", "bytea", "boolean",
                         "jsonb"] | None = None
    device_data_point_id: uuid.UUID | None = Field(
        None, description="map: the data point the column feeds (a data point of this project)")
    data_point_name: str | None = Field(
        None, min_length=1, max_length=200,
        description="auto_create_and_map: name of the data point to create or reuse "
                    "(default: the column name)")


class ApproveBody(_Body):
    column_actions: list[ColumnActionIn] | None = Field(
        None, max_length=2000,
        description="one action per source column; omitted: mirror every column")
    sync_authority: Literal[SyncAuthority.DEVICE, SyncAuthority.CLOUD] | None = Field(
        None, description="cloud_authoritative lets the cloud write rows back to this state "
                          "table; omitted: unchanged (device_authoritative by default)")


class PreviewBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    column_actions: list[ColumnActionIn] | None = Field(
        None, max_length=2000, description="as for approve; omitted: mirror every column")


class RejectBody(_Body):
    reason: str | None = Field(None, max_length=2000)
