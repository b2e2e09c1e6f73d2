"""``edgesync reviews list|show|claim|approve|reject``: over the HTTP API, or (list,
approve, reject) on the database directly."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgesync.cli._options import (
    ACTION_VERSION,
    REVIEW_ID,
    SYNC_AUTHORITIES,
    api_options,
    approval_options,
    arg,
    command,
    database_options,
)

if TYPE_CHECKING:
    import argparse

    from edgesync import governance
    from edgesync.cli._context import Ctx
    from edgesync.store import Conn

__all__ = ["REVIEW_FIELDS", "add_reviews_parser", "diff_text", "run_api", "run_on_database"]

_REVIEW_COLUMNS = [("id", "id"), ("device_name", "device"), ("source_table", "table"),
                   ("classification", "classification"), ("status", "status"),
                   ("action_version", "version"), ("claimed_by", "claimed by"),
                   ("decided_by", "decided by"), ("created_at", "created")]
REVIEW_FIELDS = ["id", "lineage_id", "device_id", "device_name", "source_table", "schema_hash",
                 "classification", "status", "action_version", "claimed_by", "decided_by",
                 "decision_reason", "created_at", "updated_at"]
_STATUSES = ["queued", "in_review", "approved", "rejected", "abandoned"]
_ACTION_VERSION = arg("--action-version", type=int, default=None,
                      help="the action_version you last saw (API; default: the current)")


def add_reviews_parser(sub: Any) -> None:
    reviews = command(sub, "reviews", "list, show, claim, approve and reject schema reviews",
                      "Operate the schema review workflow.", api=False)
    rsub = reviews.add_subparsers(dest="reviews_command", required=True, metavar="ACTION")
    command(rsub, "list", "list reviews", "List schema reviews.",
            arg("--status", choices=_STATUSES),
            arg("--lineage-id", default=None, help="only this lineage's reviews (API)"),
            arg("--device", default=None, metavar="ID_OR_NAME",
                help="only this device's reviews: its id or its name (API)"),
            pages=True, database=True)
    command(rsub, "show", "show a review: schema, diff, decision",
            "Show one schema review with its columns and diff.", REVIEW_ID)
    command(rsub, "claim", "claim a queued review (queued → in_review)",
            "Claim a review, so you can approve or reject it.", REVIEW_ID, ACTION_VERSION)

    approve = command(
        rsub, "approve", "claim (if queued) and approve a review",
        "Approve a schema review (a queued one is claimed in the same transaction, so a "
        "refused approval leaves it as it was). Column actions come from --actions FILE (a "
        "JSON list) and/or the flags --mirror/--ignore/--defer (which win over the file); a "
        "column neither names gets the review's suggested action (the last approval's "
        "decisions carried forward: 'reviews show' lists them), or with --mirror-all is "
        "mirrored under its own name.", REVIEW_ID,
        arg("--actions", type=Path,
            help="JSON file with a list of column actions "
                 '([{"source_column_name": ..., "action": "mirror"|...}])'),
        arg("--mirror", action="append", default=[], metavar="COL[:NAME]",
            help="mirror COL (as NAME in the target table); repeatable (API)"),
        arg("--ignore", action="append", default=[], metavar="COL",
            help="do not sync COL; repeatable (API)"),
        arg("--defer", action="append", default=[], metavar="COL",
            help="decide about COL later; repeatable (API)"), api=False)
    approval_options(approve)
    for a in (arg("--sync-authority", choices=SYNC_AUTHORITIES,
                  help="cloud_authoritative allows write-back (lineages write) (API)"),
              _ACTION_VERSION,
              arg("--actor", default=os.environ.get("USER", "operator"),
                  help="with --database-url: who decided (the API records the token's "
                       "principal)")):
        a.add_to(approve)
    database_options(approve)
    api_options(approve)

    command(rsub, "reject", "reject a review",
            "Reject a schema review; the lineage stays paused and rows stay staged.",
            REVIEW_ID, arg("--reason", default=None), _ACTION_VERSION,
            arg("--actor", default=os.environ.get("USER", "operator"),
                help="with --database-url: who decided"), database=True)


def run_api(ctx: Ctx) -> None:
    from edgesync.cli._context import flagged_actions

    a, api = ctx.args, ctx.api
    cmd = a.reviews_command
    rid = str(getattr(a, "review_id", ""))
    if cmd == "list":
        ctx.page(api.reviews(status=a.status, lineage_id=a.lineage_id,
                             **_device_filter(a.device), **ctx.paging()), _REVIEW_COLUMNS)
    elif cmd == "show":
        ctx.detail(api.review(rid), _write_review)
    elif cmd == "claim":
        version = a.action_version or api.review(rid)["action_version"]
        ctx.item(api.claim(rid, version), REVIEW_FIELDS, "claimed")
    elif cmd == "approve":
        review = api.review(rid)
        actions = flagged_actions(ctx, review, a.defer)
        # A queued review is claimed by the approval itself (one transaction): a refused
        # approval leaves it as it was.
        version = a.action_version or review["action_version"]
        ctx.item(api.approve(rid, version, actions, a.sync_authority), REVIEW_FIELDS,
                 "approved")
    else:
        version = a.action_version or api.review(rid)["action_version"]
        ctx.item(api.reject(rid, version, a.reason), REVIEW_FIELDS, "rejected")


def _device_filter(device: str | None) -> dict[str, str]:
    """``--device``: a device id, or else its name."""
    if device is None:
        return {}
    try:
        return {"device_id": str(uuid.UUID(device))}
    except ValueError:
        return {"device_name": device}


def _write_review(ctx: Ctx, data: dict[str, Any]) -> None:
    from edgesync.cli._context import write_review_head, write_suggestions

    write_review_head(ctx, data, REVIEW_FIELDS)
    if data.get("column_actions"):
        ctx.section("column actions", data["column_actions"],
                    [("source_column_name", "column"), ("action", "action"),
                     ("mirror_column_name", "mirror column"), ("target_type", "type")])
    write_suggestions(ctx, data)
    ctx.out.write("\ndiff against the approved schema\n" + diff_text(data) + "\n")


_DIFF_WORDS = {"added": "added", "dropped": "dropped", "type_changed": "type changed",
               "pk_changed": "primary key changed", "nullability_changed": "nullability changed"}


def diff_text(review: dict[str, Any]) -> str:
    """A review's column diff as lines (``type changed: temp_c (REAL → TEXT)``), not JSON."""
    before = {str(c["name"]): c for c in review.get("approved_schema_columns") or []}
    now = {str(c["name"]): c for c in (review.get("schema_columns") or {}).get("columns") or []}

    def name(kind: str, col: str) -> str:
        if kind == "type_changed" and col in before and col in now:
            return (f"{col} ({before[col]['decl_type_affinity']} → "
                    f"{now[col]['decl_type_affinity']})")
        return col

    lines = [f"{_DIFF_WORDS.get(k, k)}: {', '.join(name(k, str(c)) for c in cols)}"
             for k, cols in (review.get("diff") or {}).items() if cols]
    return "\n".join(lines) or "no column changes"


async def run_on_database(conn: Conn, args: argparse.Namespace) -> Any:
    from edgesync import governance, operations

    if args.reviews_command == "list":
        return [_review_summary(r) for r in
                await governance.list_reviews(conn, status=args.status)]
    if args.reviews_command == "approve":
        return _review_summary(await operations.approve_review(
            conn, args.review_id, actor=args.actor, action_version=None,
            column_actions=await _db_actions(conn, args),
            sync_authority=args.sync_authority))
    return _review_summary(await operations.reject_review(
        conn, args.review_id, actor=args.actor, action_version=None, reason=args.reason))


async def _db_actions(conn: Conn, args: argparse.Namespace) -> list[dict[str, Any]] | None:
    """Column actions from --actions and the --mirror/--ignore/--defer flags."""
    from edgesync import governance
    from edgesync.client._actions import column_actions

    if args.actions is None and not (args.mirror or args.ignore or args.defer or args.map
                                     or args.auto_map):
        return None
    review = await governance.get_review(conn, args.review_id)
    names = [str(c["name"]) for c in review.columns]
    return column_actions(names, actions_file=args.actions, mirror=args.mirror,
                          ignore=args.ignore, defer=args.defer, map_=args.map,
                          auto_map=args.auto_map)


def _review_summary(r: governance.Review) -> dict[str, Any]:
    """The review as the database-direct commands print it (a JSON document)."""
    keys = ("id", "lineage_id", "device_name", "source_table", "schema_hash",
            "classification", "status", "action_version", "claimed_by", "decided_by", "created_at")
    out = {k: getattr(r, k) for k in keys}
    out["diff"] = r.diff
    return out
