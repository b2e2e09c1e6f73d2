"""``edgesync lineages resnapshot|resnapshots|verify|verifications`` (over the HTTP API,
docs/recovery.md), and the recovery sections of ``lineages show``."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgesync.cli._format import print_fields
from edgesync.cli._options import LINEAGE_ID, arg, command, json_or_text
from edgesync.errors import ConfigError

if TYPE_CHECKING:
    from edgesync.cli._context import Ctx

__all__ = ["RECOVERY_COMMANDS", "add_recovery_parsers", "offer_command", "run_api",
           "write_offers", "write_recovery"]

RECOVERY_COMMANDS = ("resnapshot", "resnapshots", "verify", "verifications")
_RES_COLUMNS = [("id", "id"), ("status", "status"), ("rows_sent", "rows"),
                ("chunks", "chunks"), ("swept_rows", "swept"), ("filter", "filter"),
                ("error", "error"), ("created_at", "requested"),
                ("completed_at", "completed")]
_RES_FIELDS = ["id", "lineage_id", "status", "filter", "rows_sent", "chunks",
               "first_commit_seq", "last_commit_seq", "swept_rows", "verification_id", "error",
               "requested_by", "created_at", "updated_at", "completed_at"]
_VER_COLUMNS = [("id", "id"), ("status", "status"), ("device_rows", "device rows"),
                ("cloud_rows", "cloud rows"), ("differing_buckets", "differing"),
                ("resnapshot_id", "repair"), ("error", "error"), ("created_at", "requested")]
_VER_FIELDS = ["id", "lineage_id", "status", "prefix", "columns", "skipped_columns",
               "device_rows", "cloud_rows", "differing_buckets", "changed_buckets", "repair",
               "resnapshot_id", "error", "requested_by", "created_at", "completed_at"]
_POLL_S = 1.0
_WAIT = (arg("--wait", action="store_true", help="poll until it is finished"),
         arg("--wait-timeout", type=float, default=600.0, metavar="SECONDS",
             help="with --wait: give up after this long (default 600)"))


def add_recovery_parsers(lsub: Any) -> None:
    command(lsub, "resnapshot", "ask the device to send a state table's rows again",
            "Ask the device to send the table's current rows again (all, or those a "
            "structured filter selects: never SQL). They are merged newer-wins with live "
            "changes. --where COL:OP:VALUE (op eq, ne, lt, le, gt, ge, in with a JSON "
            "list, is_null, not_null; VALUE is JSON or a bare string), --from/--to "
            "COL=VALUE (a primary-key range, from inclusive, to exclusive, every key "
            "column), --bucket HEX (pk-hash prefixes, all of one length), or --filter FILE "
            "(the JSON filter). --wait follows it to the end.", LINEAGE_ID,
            arg("--where", action="append", default=[], metavar="COL:OP:VALUE"),
            arg("--from", dest="key_from", action="append", default=[],
                metavar="COL=VALUE", help="key range start (inclusive)"),
            arg("--to", dest="key_to", action="append", default=[],
                metavar="COL=VALUE", help="key range end (exclusive)"),
            arg("--bucket", action="append", default=[], metavar="HEX",
                help="only rows whose _edge_pk_hash starts with HEX (repeatable)"),
            arg("--filter", dest="filter_file", type=Path, default=None, metavar="FILE",
                help="the whole filter as JSON ('-': standard input)"), *_WAIT)
    command(lsub, "verify", "compare the device's table with the cloud's mirror",
            "Ask the device for a digest of the table (row count and a hash per bucket of "
            "the primary-key hash, over the approved mirrored columns) and compare it with "
            "the mirror. --repair re-snapshots the buckets that differ. --wait prints the "
            "result.", LINEAGE_ID,
            arg("--prefix", type=int, default=2, metavar="N",
                help="hex digits of the pk hash per bucket, 1 to 3 (default 2: 256)"),
            arg("--repair", action="store_true", help="re-snapshot the differing buckets"),
            *_WAIT)
    for name, what in (("resnapshots", "re-snapshots of a lineage and their progress"),
                       ("verifications", "verifications of a lineage and their results")):
        command(lsub, name, what, f"List the {what}, newest first.", LINEAGE_ID, pages=True)


def _where(term: str) -> dict[str, Any]:
    column, _, rest = term.partition(":")
    op, sep, value = rest.partition(":")
    if not column or not op:
        raise ConfigError("--where", f"{term!r} is not COL:OP[:VALUE] (e.g. n:gt:5, "
                          "site:in:[\"a\",\"b\"], note:is_null)")
    return {"column": column, "op": op} | ({"value": json_or_text(value)} if sep else {})


def _key(items: list[str], option: str) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    for item in items:
        column, sep, value = item.partition("=")
        if not sep or not column:
            raise ConfigError(option, f"{item!r} is not COL=VALUE")
        out[column] = json_or_text(value)
    return out or None


def _filter(ctx: Ctx) -> dict[str, Any] | None:
    a = ctx.args
    if a.filter_file is not None:
        if a.where or a.key_from or a.key_to or a.bucket:
            raise ConfigError("--filter", "give the filter as a file or as options, not both")
        from edgesync.client._actions import load_json_file

        doc = load_json_file(a.filter_file, "--filter")
        if not isinstance(doc, dict):
            raise ConfigError("--filter", "expected a JSON object (where, key_range, buckets)")
        return doc
    out: dict[str, Any] = {}
    if a.where:
        out["where"] = [_where(t) for t in a.where]
    start, end = _key(a.key_from, "--from"), _key(a.key_to, "--to")
    if start or end:
        out["key_range"] = {k: v for k, v in (("from", start), ("to", end)) if v}
    if a.bucket:
        lengths = {len(b) for b in a.bucket}
        if len(lengths) != 1:
            raise ConfigError("--bucket", "every bucket must have the same number of hex digits")
        out["buckets"] = {"prefix": lengths.pop(), "values": [b.lower() for b in a.bucket]}
    return out or None


def _wait(ctx: Ctx, path: str, job_id: str, done: tuple[str, ...]) -> dict[str, Any]:
    deadline = time.monotonic() + ctx.args.wait_timeout
    while True:
        for item in ctx.api.get_page(path, limit=100)["data"]:
            if item["id"] == job_id and item["status"] in done:
                return dict(item)
        if time.monotonic() >= deadline:
            raise ConfigError("--wait-timeout", f"{job_id} did not finish within "
                              f"{ctx.args.wait_timeout:.0f}s; follow it with "
                              f"`edgesync lineages {path.rsplit('/', 1)[-1]}`")
        time.sleep(_POLL_S)


def run_api(ctx: Ctx, lid: str) -> None:
    a, api = ctx.args, ctx.api
    cmd = a.lineages_command
    base = f"/edge/lineages/{lid}"
    if cmd in ("resnapshots", "verifications"):
        ctx.page(api.get_page(f"{base}/{cmd}", **ctx.paging()),
                 _RES_COLUMNS if cmd == "resnapshots" else _VER_COLUMNS)
        return
    if cmd == "resnapshot":
        flt = _filter(ctx)
        job = api.resnapshot(lid, flt)
        if a.wait:
            job = _wait(ctx, f"{base}/resnapshots", job["id"], ("completed", "failed"))
        ctx.item(job, _RES_FIELDS, None if a.wait else "re-snapshot requested")
        return
    job = api.verify(lid, prefix=a.prefix, repair=a.repair)
    if a.wait:
        job = _wait(ctx, f"{base}/verifications", job["id"], ("equal", "different", "failed"))
    ctx.item(job, _VER_FIELDS, None if a.wait else "verification requested")


def offer_command(action: str, lineage_id: str) -> str:
    """The command that takes an offered action (a whole-table re-snapshot, a verify)."""
    return f"edgesync lineages {action} {lineage_id}"


def write_offers(ctx: Ctx, lineage_id: str, offers: list[dict[str, Any]]) -> None:
    """The ``lineages show`` section of what the lineage's detail offers, each with the
    command that takes it (docs/recovery.md, "Offered at the right moment")."""
    if not offers:
        return
    ctx.out.write("\nrecovery offered\n")
    for o in offers:
        since = datetime.fromtimestamp(o["since_ms"] / 1000, UTC).isoformat(timespec="seconds")
        gap = f", gap {o['gap_id']}" if o.get("gap_id") is not None else ""
        ctx.out.write(f"  {o['action']} ({o['reason']}{gap}, since {since})\n"
                      f"    {o['detail']}\n"
                      f"    run: {offer_command(o['action'], lineage_id)}\n")


def write_recovery(ctx: Ctx, recovery: dict[str, Any]) -> None:
    """The ``lineages show`` sections of the newest re-snapshot and verification."""
    if recovery.get("resnapshot"):
        ctx.out.write("\nlast re-snapshot\n")
        print_fields(recovery["resnapshot"], ["id", "status", "rows_sent", "chunks",
                                              "swept_rows", "error", "created_at"], ctx.out)
    if recovery.get("verification"):
        ctx.out.write("\nlast verification\n")
        print_fields(recovery["verification"], ["id", "status", "device_rows", "cloud_rows",
                                                "differing_buckets", "resnapshot_id", "error",
                                                "created_at"], ctx.out)
