"""``registry`` and ``data-points`` over the HTTP API, and the data point references of
``--map`` (an id, or a name looked up in the project)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import orjson

from edgesync.client._actions import column_actions
from edgesync.client._client import ProjectApi
from edgesync.client._format import print_fields, print_json, print_table
from edgesync.errors import ConfigError

if TYPE_CHECKING:
    from edgesync.client._run import Ctx

__all__ = ["data_points_command", "registry_command", "resolve_map_specs"]

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


def _paging(ctx: Ctx) -> dict[str, Any]:
    return {"page": ctx.args.page, "limit": ctx.args.limit}


def resolve_map_specs(api: ProjectApi, specs: list[str]) -> list[str]:
    """``COL=DATA_POINT`` with DATA_POINT an id, or a name of the project's data points."""
    out, by_name = [], None
    for spec in specs:
        column, sep, ref = spec.partition("=")
        if not sep or not ref:
            raise ConfigError("--map", f"{spec!r} is not COLUMN=DATA_POINT")
        try:
            uuid.UUID(ref)
        except ValueError:
            if by_name is None:
                by_name = {d["name"]: d["id"] for d in api.data_points(limit=500)["data"]}
            if ref not in by_name:
                raise ConfigError("--map", f"no data point named {ref!r} in the project "
                                           "(edgesync data-points list)") from None
            ref = by_name[ref]
        out.append(f"{column}={ref}")
    return out


def _column_names(review: dict[str, Any]) -> list[str]:
    return [str(c["name"]) for c in (review.get("schema_columns") or {}).get("columns", [])]


def _show_review(ctx: Ctx, data: dict[str, Any]) -> None:
    if ctx.json:
        print_json({"data": data}, ctx.out)
        return
    print_fields(data, _REVIEW_FIELDS, ctx.out)
    ctx.out.write("\ncolumns\n")
    print_table((data.get("schema_columns") or {}).get("columns", []),
                [("name", "name"), ("decl_type", "declared type"),
                 ("decl_type_affinity", "affinity"), ("pk_ordinal", "pk"),
                 ("not_null", "not null")], ctx.out)
    ctx.out.write("\ndevices\n")
    print_table(data.get("devices") or [], _DEVICE_COLUMNS, ctx.out)
    if data.get("column_actions"):
        ctx.out.write("\ncolumn actions\n")
        print_table(data["column_actions"], _ACTION_COLUMNS, ctx.out)


def _show_entry(ctx: Ctx, data: dict[str, Any]) -> None:
    if ctx.json:
        print_json({"data": data}, ctx.out)
        return
    print_fields(data, _ENTRY_FIELDS, ctx.out)
    ctx.out.write("\ndevices\n")
    print_table(data["devices"], _DEVICE_COLUMNS, ctx.out)
    if data.get("column_actions"):
        ctx.out.write("\ncolumn actions\n")
        print_table(data["column_actions"], _ACTION_COLUMNS, ctx.out)


def _show_consolidation(ctx: Ctx, data: dict[str, Any]) -> None:
    if ctx.json:
        print_json({"data": data}, ctx.out)
        return
    ctx.out.write(f"consolidated ({len(data['consolidated'])})\n")
    print_table(data["consolidated"], _CONSOLIDATED_COLUMNS, ctx.out)
    ctx.out.write(f"\nskipped ({len(data['skipped'])})\n")
    print_table(data["skipped"], _SKIPPED_COLUMNS, ctx.out)


def registry_command(ctx: Ctx) -> None:
    a, api = ctx.args, ctx.api
    cmd, fleet = a.registry_command, a.fleet_id
    if cmd == "list":
        ctx.page(api.registry_entries(fleet, status=a.status, **_paging(ctx)), _ENTRY_COLUMNS)
    elif cmd == "show":
        _show_entry(ctx, api.registry_entry(str(a.registry_id), fleet))
    elif cmd == "reviews":
        ctx.page(api.registry_reviews(fleet, status=a.status, **_paging(ctx)), _REVIEW_COLUMNS)
    elif cmd == "review-show":
        _show_review(ctx, api.registry_review(str(a.review_id), fleet))
    elif cmd == "mirrors":
        ctx.page(api.coalesced_mirrors(fleet, **_paging(ctx)), _MIRROR_COLUMNS)
    elif cmd == "mirror-show":
        ctx.item(api.coalesced_mirror(a.mirror_id, fleet), _MIRROR_FIELDS)
    elif cmd == "consolidate":
        _show_consolidation(ctx, api.consolidate(a.source_table, fleet))
    else:
        _decide(ctx, cmd)


def _decide(ctx: Ctx, cmd: str) -> None:
    a, api = ctx.args, ctx.api
    rid, fleet = str(a.review_id), a.fleet_id
    review = api.registry_review(rid, fleet)
    version = a.action_version or review["action_version"]
    if cmd == "approve":
        actions = column_actions(_column_names(review), actions_file=a.actions,
                                 mirror=a.mirror, ignore=a.ignore, defer=[],
                                 map_=resolve_map_specs(api, a.map), auto_map=a.auto_map)
        if review["status"] == "queued":
            version = api.decide_registry_review(rid, "claim", version,
                                                 fleet_id=fleet)["action_version"]
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
        ctx.page(api.data_points(**_paging(ctx)), _POINT_COLUMNS)
    elif cmd == "show":
        ctx.item(api.data_point(str(a.data_point_id)), fields)
    elif cmd == "create":
        ctx.item(api.create_data_point(a.name, a.value_type, a.unit), fields,
                 "data point created")
    else:
        doc = api.data_point_values(str(a.data_point_id), device_id=a.device_id,
                                    **{"from": a.from_}, to=a.to, **_paging(ctx))
        if not ctx.json:  # a JSON value as JSON, so a string "1" and a number 1 differ
            doc = {**doc, "data": [{**v, "value": orjson.dumps(v["value"]).decode()}
                                   for v in doc["data"]]}
        ctx.page(doc, _VALUE_COLUMNS)
