"""``registry`` and ``data-points`` over the HTTP API."""

from __future__ import annotations

from typing import Any

import orjson

from edgesync.client._context import Ctx, flagged_actions, write_review_head, write_suggestions
from edgesync.client._format import print_fields, print_table

__all__ = ["data_points_command", "registry_command"]

_ENTRY_COLUMNS = [("id", "id"), ("scope", "scope"), ("source_table", "table"),
                  ("pipeline", "pipeline"), ("status", "status"),
                  ("device_count", "devices"), ("target_table", "target")]
_ENTRY_FIELDS = ["id", "scope", "fleet_id", "source_table", "pipeline", "schema_hash",
                 "classification", "status", "target_table", "device_count", "created_at",
                 "updated_at"]
_REVIEW_COLUMNS = [("id", "id"), ("scope", "scope"), ("source_table", "table"),
                   ("classification", "classification"), ("status", "status"),
                   ("action_version", "version"), ("claimed_by", "claimed by"),
                   ("decided_by", "decided by"), ("created_at", "created")]
_REVIEW_FIELDS = ["id", "registry_id", "scope", "fleet_id", "source_table", "pipeline",
                  "schema_hash", "classification", "status", "action_version", "claimed_by",
                  "decided_by", "decision_reason", "target_table", "created_at", "updated_at"]
_MIRROR_COLUMNS = [("id", "id"), ("scope", "scope"), ("fleet_id", "fleet"),
                   ("pipeline", "pipeline"), ("source_table", "table"),
                   ("device_count", "devices")]
_MIRROR_FIELDS = ["id", "scope", "fleet_id", "pipeline", "source_table", "schema_hashes",
                  "device_count", "created_at"]
_CONSOLIDATED_COLUMNS = [("device_id", "device"), ("lineage_id", "lineage"),
                         ("from_table", "from"), ("to_table", "to"), ("rows_copied", "rows"),
                         ("tombstones_copied", "tombstones")]
_SKIPPED_COLUMNS = [("device_id", "device"), ("lineage_id", "lineage"), ("reason", "reason"),
                    ("target_table", "target"), ("detail", "detail")]
_DEVICE_COLUMNS = [("device_id", "device"), ("lineage_id", "lineage"), ("status", "status")]
_ACTION_COLUMNS = [("source_column_name", "column"), ("action", "action"),
                   ("mirror_column_name", "mirror column"), ("target_type", "type"),
                   ("device_data_point_id", "data point")]
_POINT_COLUMNS = [("id", "id"), ("name", "name"), ("value_type", "type"), ("unit", "unit"),
                  ("created_at", "created")]
_VALUE_COLUMNS = [("ts", "ts"), ("device_id", "device"), ("value", "value"),
                  ("source_key", "source key"), ("source_version", "source version")]


def _write_review(ctx: Ctx, data: dict[str, Any]) -> None:
    write_review_head(ctx, data, _REVIEW_FIELDS)
    _write_devices_and_actions(ctx, data)
    write_suggestions(ctx, data)


def _write_entry(ctx: Ctx, data: dict[str, Any]) -> None:
    print_fields(data, _ENTRY_FIELDS, ctx.out)
    _write_devices_and_actions(ctx, data)


def _write_devices_and_actions(ctx: Ctx, data: dict[str, Any]) -> None:
    """The device lineages waiting on (or linked to) a registry decision, and the column
    actions once there are any."""
    ctx.section("devices", data.get("devices") or [], _DEVICE_COLUMNS)
    if data.get("column_actions"):
        ctx.section("column actions", data["column_actions"], _ACTION_COLUMNS)


def _write_consolidation(ctx: Ctx, data: dict[str, Any]) -> None:
    ctx.out.write(f"consolidated ({len(data['consolidated'])})\n")
    print_table(data["consolidated"], _CONSOLIDATED_COLUMNS, ctx.out)
    ctx.section(f"skipped ({len(data['skipped'])})", data["skipped"], _SKIPPED_COLUMNS)


def registry_command(ctx: Ctx) -> None:
    a, api = ctx.args, ctx.api
    cmd, fleet = a.registry_command, a.fleet_id
    if cmd == "list":
        ctx.page(api.registry_entries(fleet, status=a.status, **ctx.paging()), _ENTRY_COLUMNS)
    elif cmd == "show":
        ctx.detail(api.registry_entry(str(a.registry_id), fleet), _write_entry)
    elif cmd == "reviews":
        ctx.page(api.registry_reviews(fleet, status=a.status, **ctx.paging()), _REVIEW_COLUMNS)
    elif cmd == "review-show":
        ctx.detail(api.registry_review(str(a.review_id), fleet), _write_review)
    elif cmd == "mirrors":
        ctx.page(api.coalesced_mirrors(fleet, **ctx.paging()), _MIRROR_COLUMNS)
    elif cmd == "mirror-show":
        ctx.item(api.coalesced_mirror(a.mirror_id, fleet), _MIRROR_FIELDS)
    elif cmd == "consolidate":
        ctx.detail(api.consolidate(a.source_table, fleet), _write_consolidation)
    else:
        _decide(ctx, cmd)


def _decide(ctx: Ctx, cmd: str) -> None:
    a, api = ctx.args, ctx.api
    rid, fleet = str(a.review_id), a.fleet_id
    review = api.registry_review(rid, fleet)
    version = a.action_version or review["action_version"]
    if cmd == "approve":
        actions = flagged_actions(ctx, review, defer=[])  # refused at registry scope
        # A queued review is claimed by the approval itself (one transaction).
        data = api.decide_registry_review(rid, "approve", version, column_actions=actions,
                                          fleet_id=fleet)
    else:
        data = api.decide_registry_review(rid, cmd, version, reason=getattr(a, "reason", None),
                                          fleet_id=fleet)
    title = {"claim": "claimed", "approve": "approved", "reject": "rejected",
             "abandon": "abandoned"}[cmd]
    ctx.item(data, _REVIEW_FIELDS, title)


def data_points_command(ctx: Ctx) -> None:
    a, api = ctx.args, ctx.api
    cmd = a.data_points_command
    fields = ["id", "name", "value_type", "unit", "created_at"]
    if cmd == "list":
        ctx.page(api.data_points(**ctx.paging()), _POINT_COLUMNS)
    elif cmd == "show":
        ctx.item(api.data_point(str(a.data_point_id)), fields)
    elif cmd == "create":
        ctx.item(api.create_data_point(a.name, a.value_type, a.unit), fields,
                 "data point created")
    else:
        doc = api.data_point_values(str(a.data_point_id), device_id=a.device_id,
                                    **{"from": a.from_}, to=a.to, **ctx.paging())
        if not ctx.json:  # a JSON value as JSON, so a string "1" and a number 1 differ
            doc = {**doc, "data": [{**v, "value": orjson.dumps(v["value"]).decode()}
                                   for v in doc["data"]]}
        ctx.page(doc, _VALUE_COLUMNS)
