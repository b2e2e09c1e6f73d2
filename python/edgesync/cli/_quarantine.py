"""``edgesync lineages quarantine list|show|retry|retry-all|discard`` (over the HTTP API):
rows PostgreSQL or the encoder refused, kept apart with why (docs/recovery.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from edgesync.cli._confirm import confirm
from edgesync.cli._format import print_fields
from edgesync.cli._options import LINEAGE_ID, arg, command, json_or_text
from edgesync.errors import ConfigError

if TYPE_CHECKING:
    from edgesync.cli._context import Ctx

__all__ = ["add_quarantine_parser", "run_api"]

_COLUMNS = [("id", "id"), ("status", "status"), ("commit_seq", "commit_seq"), ("op", "op"),
            ("event_ts", "ts"), ("reason_code", "code"), ("reason", "reason"),
            ("attempts", "attempts"), ("quarantined_at", "quarantined")]
_FIELDS = ["id", "lineage_id", "device_id", "pipeline", "source_table", "status", "batch_id",
           "segment_id", "journal_epoch", "commit_seq", "op", "pk_hash", "batch_seq",
           "event_ts", "row_id", "schema_hash", "reason_code", "reason", "reason_field",
           "attempts", "edited_by", "resolved_by", "quarantined_at", "resolved_at"]
_ROW_ID = arg("row_id", type=int, help="quarantined row id (from list)")
_YES = arg("--yes", "-y", action="store_true", help="do not ask for confirmation")


def add_quarantine_parser(lsub: Any) -> None:
    quar = command(lsub, "quarantine", "rows that could not be written: list, show, retry, "
                   "discard", "Quarantined rows: a row PostgreSQL or the encoder refused is "
                   "kept apart with why, while the rest of its batch and its lineage go on "
                   "(docs/recovery.md).", api=False)
    qsub = quar.add_subparsers(dest="quarantine_command", required=True, metavar="ACTION")
    command(qsub, "list", "list a lineage's quarantined rows, oldest first",
            "List quarantined rows: id, change, reason, status.", LINEAGE_ID,
            arg("--status", choices=["open", "superseded", "retried"], default=None,
                help="only rows of this status (default: all)"), pages=True)
    command(qsub, "show", "show one quarantined row: payload, reason, attempts",
            "Show one quarantined row with the row as the device sent it.", LINEAGE_ID, _ROW_ID)
    command(qsub, "retry", "write a quarantined row again (optionally edited)",
            "Write a quarantined row again through the writer, as it is or with "
            "--set COL=VALUE (VALUE as JSON: 42, 1.5, \"text\", null, or a bare word "
            "for a string) and/or --values FILE (a JSON object) replacing values of "
            "its row first. Refused again, it stays open with the new reason.",
            LINEAGE_ID, _ROW_ID,
            arg("--set", action="append", default=[], metavar="COL=VALUE", dest="set_values",
                help="replace COL's value; repeatable"),
            arg("--values", type=Path, default=None, metavar="FILE",
                help="JSON object of new values ('-' reads standard input)"))
    command(qsub, "retry-all", "write every open quarantined row of a lineage again",
            "Retry every open quarantined row of the lineage as it is (after "
            "fixing the cause, e.g. widening a column); prints how many were "
            "written, refused again and found superseded.", LINEAGE_ID)
    command(qsub, "discard", "delete a quarantined row, or all of a lineage's, for good",
            "Delete one quarantined row (ROW_ID) or every one of the lineage (--all). "
            "Asks first unless --yes.", LINEAGE_ID,
            arg("row_id", type=int, nargs="?", default=None,
                help="quarantined row id (or --all)"),
            arg("--all", action="store_true", dest="all_rows",
                help="every quarantined row of the lineage"), _YES)


def _values(ctx: Ctx) -> dict[str, Any] | None:
    from edgesync.client._actions import load_json_file

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
        values[column] = json_or_text(value)
    return values or None


def _show(ctx: Ctx, data: dict[str, Any]) -> None:
    print_fields(data, _FIELDS, ctx.out)
    ctx.out.write("\nrow\n" + orjson.dumps(data["row"], option=orjson.OPT_INDENT_2).decode()
                  + "\n")


def run_api(ctx: Ctx, lid: str) -> None:
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
        confirm(f"Discard {what} of lineage {lid} for good?")
    path = f"{base}/discard" if a.all_rows else f"{base}/{a.row_id}/discard"
    ctx.item(ctx.api.post(path), ["lineage_id", "discarded_rows"], "quarantined rows discarded")
