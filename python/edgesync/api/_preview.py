"""What approving a schema review with given column actions would give, without doing it:
the target table and its columns, the data points fed, the columns not synced or deferred.
It validates the actions as the approval does (a ``422`` names the action at fault), so a
console can show the result before the operator approves."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel, Field

from edgesync.api._lineage_queries import get_lineage
from edgesync.errors import ConflictError, InvalidRequestError
from edgesync.governance import RegistryReview, Review
from edgesync.governance._bindings import plan_columns, state_prefix
from edgesync.governance._column_actions import MAP_ACTIONS, ColumnAction, mirror_all_actions
from edgesync.governance._registry import coalesced_table_name, registry_columns
from edgesync.materialize import target_table_name, ts_table_name
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


class ApprovalPreview(BaseModel):
    target_table: str = Field(description="the table the approval writes to (created if new)")
    pipeline: str
    columns: list[PreviewColumn] = Field(description="the target's data columns")
    data_points: list[PreviewDataPoint]
    ignored: list[str]
    deferred: list[str] = Field(description="decided later: the lineage stays paused")


async def preview_review(conn: Conn, project_id: uuid.UUID, review: Review,
                         column_actions: list[dict[str, Any]] | None) -> ApprovalPreview:
    """A device review: the lineage's own target (or the one approval would create)."""
    columns = review.columns
    lineage = await get_lineage(conn, project_id, review.lineage_id)
    if lineage.pipeline == "telemetry":
        table = lineage.target_table or ts_table_name(project_id, lineage.source_table)
    else:
        table = lineage.target_table or target_table_name(state_prefix(lineage.device_id),
                                                          lineage.source_table)
    return _describe(columns, column_actions, lineage.pipeline, table)


async def preview_registry_review(conn: Conn, review: RegistryReview,
                                  column_actions: list[dict[str, Any]] | None
                                  ) -> ApprovalPreview:
    """A registry review: the coalesced target of its scope; defer is refused, as by
    the approval."""
    columns = await registry_columns(conn, review.registry_id)
    if not columns:
        raise ConflictError("no device has sent this schema's columns yet (schema_columns); "
                            "there is nothing to preview until a batch carrying them arrives")
    table = coalesced_table_name(review.pipeline, review.scope,
                                 review.fleet_id or review.project_id, review.source_table)
    preview = _describe(columns, column_actions, review.pipeline, table)
    if preview.deferred:
        i = next(i for i, a in enumerate(column_actions or []) if a["action"] == "defer")
        raise InvalidRequestError(f"column_actions[{i}].action", "defer is for device "
                                  "reviews; a registry decision binds every column")
    return preview


def _describe(columns: list[dict[str, Any]], column_actions: list[dict[str, Any]] | None,
              pipeline: str, table: str) -> ApprovalPreview:
    actions = (mirror_all_actions(columns) if column_actions is None else
               [ColumnAction.parse(a, i) for i, a in enumerate(column_actions)])
    mirrors = plan_columns(columns, actions)
    pk = {str(c["name"]) for c in columns if c.get("pk_ordinal")}
    return ApprovalPreview(
        target_table=table, pipeline=pipeline,
        columns=[PreviewColumn(source_column_name=m.source, target_column_name=m.target,
                               pg_type=m.pg_type, primary_key=m.source in pk)
                 for m in mirrors],
        data_points=[PreviewDataPoint(source_column_name=a.source_column_name,
                                      action=a.action,
                                      device_data_point_id=a.device_data_point_id,
                                      data_point_name=(a.data_point_name
                                                       or a.source_column_name
                                                       if a.action == "auto_create_and_map"
                                                       else None))
                     for a in actions if a.action in MAP_ACTIONS],
        ignored=[a.source_column_name for a in actions if a.action == "ignore"],
        deferred=[a.source_column_name for a in actions if a.action == "defer"])
