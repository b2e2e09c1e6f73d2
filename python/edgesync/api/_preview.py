"""What approving a schema review with given column actions would give, without doing it:
the target table and its columns, the data points fed, the columns not synced or deferred,
the target columns it stops writing, and every reason the approval would be refused.

The refusals come from ``governance.check_approval``, the very function the approval runs,
so ``refusals`` is empty exactly when the approval with the same body would pass (a preview
answers 200 with them; only a malformed body is a 422)."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel, Field

from edgesync.api._envelopes import RefusalOut
from edgesync.api._lineage_queries import get_lineage
from edgesync.errors import ConflictError
from edgesync.governance import RegistryReview, Review, check_approval
from edgesync.governance._approval_check import ApprovalCheck
from edgesync.governance._bindings import state_prefix
from edgesync.governance._column_actions import MAP_ACTIONS, ColumnActionKind
from edgesync.governance._registry import coalesced_table_name, registry_columns
from edgesync.materialize import target_table_name, ts_table_name
from edgesync.protocol import Pipeline
from edgesync.store import Conn

__all__ = ["ApprovalPreview", "PreviewColumn", "preview_registry_review", "preview_review"]


class PreviewColumn(BaseModel):
    source_column_name: str
    target_column_name: str
    pg_type: str
    primary_key: bool


class PreviewDataPoint(BaseModel):
    source_column_name: str
    action: str
    device_data_point_id: uuid.UUID | None
    data_point_name: str | None = Field(description="auto_create_and_map: the name used")


class PreviewRetired(BaseModel):
    name: str = Field(description="the target column")
    pg_type: str
    source_column_name: str = Field(description="the source column it was written from")


class ApprovalPreview(BaseModel):
    target_table: str = Field(description="the table the approval writes to (created if new)")
    pipeline: str
    columns: list[PreviewColumn] = Field(description="the target's data columns")
    data_points: list[PreviewDataPoint]
    ignored: list[str]
    deferred: list[str] = Field(description="decided later: the lineage stays paused")
    retired_columns: list[PreviewRetired] = Field(
        default_factory=list,
        description="target columns the approved bindings write and this approval stops "
                    "writing: they stay, with their last values (docs/governance.md)")
    refusals: list[RefusalOut] = Field(
        default_factory=list,
        description="why approving with these actions would be refused, per column; empty "
                    "exactly when the approval would pass")


async def preview_review(conn: Conn, project_id: uuid.UUID, review: Review,
                         column_actions: list[dict[str, Any]] | None) -> ApprovalPreview:
    """A device review: the lineage's own target (or the one approval would create)."""
    lineage = await get_lineage(conn, project_id, review.lineage_id)
    if lineage.target_table is not None:
        table = lineage.target_table
    elif lineage.pipeline == Pipeline.TELEMETRY:
        table = ts_table_name(project_id, lineage.source_table)
    else:
        table = target_table_name(state_prefix(lineage.device_id), lineage.source_table)
    checked = await check_approval(conn, project_id=project_id, pipeline=lineage.pipeline,
                                   table=table, columns=review.columns,
                                   column_actions=column_actions, registry=False,
                                   lineage_ids=[lineage.id])
    return _describe(review.columns, checked, lineage.pipeline, table)


async def preview_registry_review(conn: Conn, review: RegistryReview,
                                  column_actions: list[dict[str, Any]] | None
                                  ) -> ApprovalPreview:
    """A registry review: the coalesced target of its scope (defer is a refusal there)."""
    columns = await registry_columns(conn, review.registry_id)
    if not columns:
        raise ConflictError("no device has sent this schema's columns yet (schema_columns); "
                            "there is nothing to preview until a batch carrying them arrives")
    table = coalesced_table_name(review.pipeline, review.scope,
                                 review.fleet_id or review.project_id, review.source_table)
    waiting = await conn.fetch(
        "SELECT lineage_id FROM edge_schema_versions WHERE registry_id = $1 "
        "AND status = 'pending'", review.registry_id)
    checked = await check_approval(conn, project_id=review.project_id,
                                   pipeline=review.pipeline, table=table, columns=columns,
                                   column_actions=column_actions, registry=True,
                                   lineage_ids=[w["lineage_id"] for w in waiting])
    return _describe(columns, checked, review.pipeline, table)


def _describe(columns: list[dict[str, Any]], checked: ApprovalCheck, pipeline: str,
              table: str) -> ApprovalPreview:
    actions = checked.actions
    pk = {str(c["name"]) for c in columns if c.get("pk_ordinal")}
    return ApprovalPreview(
        target_table=table, pipeline=pipeline,
        columns=[PreviewColumn(source_column_name=m.source, target_column_name=m.target,
                               pg_type=m.pg_type, primary_key=m.source in pk)
                 for m in checked.mirrors],
        data_points=[PreviewDataPoint(source_column_name=a.source_column_name,
                                      action=a.action,
                                      device_data_point_id=a.device_data_point_id,
                                      data_point_name=(a.data_point_name
                                                       or a.source_column_name
                                                       if a.action
                                                       == ColumnActionKind.AUTO_CREATE_AND_MAP
                                                       else None))
                     for a in actions if a.action in MAP_ACTIONS],
        ignored=[a.source_column_name for a in actions if a.action == ColumnActionKind.IGNORE],
        deferred=[a.source_column_name for a in actions if a.action == ColumnActionKind.DEFER],
        retired_columns=[PreviewRetired(name=r.name, pg_type=r.pg_type,
                                        source_column_name=r.source_column_name)
                         for r in checked.retired],
        refusals=[RefusalOut(**r.as_json()) for r in checked.refusals])
