"""``edgesync lineages quarantine …`` over the HTTP API (docs/recovery.md)."""

from __future__ import annotations

import sys
from typing import Any

import orjson

from edgesync.client._actions import load_json_file
from edgesync.client._context import Ctx
from edgesync.client._format import print_fields
from edgesync.errors import ConfigError

__all__ = ["quarantine_command"]

_COLUMNS = [("id", "id"), ("status", "status"), ("commit_seq", "commit_seq"), ("op", "op"),
            ("event_ts", "ts"), ("reason_code", "code"), ("reason", "reason"),
            ("attempts", "attempts"), ("quarantined_at", "quarantined")]
_FIELDS = ["id", "lineage_id", "device_id", "pipeline", "source_table", "status", "batch_id",
           "segment_id", "journal_epoch", "commit_seq", "op", "pk_hash", "batch_seq",
           "event_ts", "row_id", "schema_hash", "reason_code", "reason", "reason_field",
           "attempts", "edited_by", "resolved_by", "quarantined_at", "resolved_at"]


def _value(text: str) -> Any:
    """A --set VALUE: JSON (42, 1.5, "x", null, true), else the text as a string."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _values(ctx: Ctx) -> dict[str, Any] | None:
    a = ctx.args
    values: dict[str, Any] = {}
    if a.values is not None:
        doc = load_json_file(a.values, "--values")
        if not isinstance(doc, dict):
            raise ConfigError("--values", "expected a JSON object of column: value")
        values.update(doc)
    for change in a.set_values:
        column, sep, value = change.partition("=")
        if not sep or not column:
            raise ConfigError("--set", f"{change!r} is not COL=VALUE")
        values[column] = _value(value)
    return values or None


def _show(ctx: Ctx, data: dict[str, Any]) -> None:
    print_fields(data, _FIELDS, ctx.out)
    ctx.out.write("\nrow\n" + orjson.dumps(data["row"], option=orjson.OPT_INDENT_2).decode()
                  + "\n")


def quarantine_command(ctx: Ctx, lid: str) -> None:
    a, api = ctx.args, ctx.api
    base = f"/edge/lineages/{lid}/quarantine"
    cmd = a.quarantine_command
    if cmd == "list":
        ctx.page(api.get_page(base, status=a.status, **ctx.paging()), _COLUMNS)
    elif cmd == "show":
        ctx.detail(api.get(f"{base}/{a.row_id}"), _show)
    elif cmd == "retry":
        values = _values(ctx)
        body = {"values": values} if values is not None else {}
        data = api.post(f"{base}/{a.row_id}/retry", body)
        ctx.item(data, ["id", "status", "written", "reason_code", "reason"],
                 "row written" if data["written"] else "row refused again; still quarantined")
    elif cmd == "retry-all":
        data = api.post(f"{base}/retry")
        ctx.item(data, ["lineage_id", "retried", "failed", "superseded"],
                 "quarantined rows retried")
        if not ctx.json and data["failures"]:
            ctx.section("refused again", data["failures"],
                        [("id", "id"), ("reason_code", "code"), ("reason", "reason")])
    else:
        _discard(ctx, lid, base)


def _discard(ctx: Ctx, lid: str, base: str) -> None:
    a = ctx.args
    if (a.row_id is None) == (not a.all_rows):
        raise ConfigError("ROW_ID", "give one quarantined row id, or --all (not both)")
    what = "every quarantined row" if a.all_rows else f"quarantined row {a.row_id}"
    if not a.yes:
        sys.stderr.write(f"Discard {what} of lineage {lid} for good? [y/N] ")
        sys.stderr.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            from edgesync.client._run import _Aborted

            raise _Aborted()
    path = f"{base}/discard" if a.all_rows else f"{base}/{a.row_id}/discard"
    ctx.item(ctx.api.post(path), ["lineage_id", "discarded_rows"], "quarantined rows discarded")
