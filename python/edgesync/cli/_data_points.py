"""``edgesync data-points …`` (over the HTTP API): device data points, the named, typed
values that columns approved with map / auto_create_and_map feed, and their values."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import orjson

from edgesync.cli._options import arg, command

if TYPE_CHECKING:
    from edgesync.cli._context import Ctx

__all__ = ["add_data_points_parser", "run_api"]

_POINT_COLUMNS = [("id", "id"), ("name", "name"), ("value_type", "type"), ("unit", "unit"),
                  ("created_at", "created")]
_VALUE_COLUMNS = [("ts", "ts"), ("device_id", "device"), ("value", "value"),
                  ("source_key", "source key"), ("source_version", "source version")]


def add_data_points_parser(sub: Any) -> None:
    points = command(sub, "data-points", "list and create device data points, read their "
                     "values", "Device data points: named, typed values that columns "
                     "approved with map / auto_create_and_map feed.", api=False)
    psub = points.add_subparsers(dest="data_points_command", required=True, metavar="ACTION")
    point_id = arg("data_point_id", type=uuid.UUID)
    command(psub, "list", "list data points", "List the project's data points.", pages=True)
    command(psub, "show", "show a data point", "Show one data point.", point_id)
    command(psub, "create", "create a data point", "Create a data point.",
            arg("name", help="unique in the project"),
            arg("--type", dest="value_type", required=True,
                choices=["integer", "real", "numeric", "text", "boolean", "blob", "json"]),
            arg("--unit", default=None))
    command(psub, "values", "values of a data point, oldest first",
            "List a data point's values in a time range, oldest first.", point_id,
            arg("--device-id", default=None, help="only this device's values"),
            arg("--from", dest="from_", default=None, metavar="TIME",
                help="ts at or after (RFC 3339)"),
            arg("--to", default=None, metavar="TIME", help="ts before (RFC 3339)"),
            pages=True)


def run_api(ctx: Ctx) -> None:
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
