"""``edgesync registry …`` (over the HTTP API): registry coalescing's entries, registry
reviews and their decisions, coalesced mirrors, consolidation."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgesync.cli._format import print_fields, print_table
from edgesync.cli._options import (
    ACTION_VERSION,
    FLEET_ID,
    REVIEW_ID,
    api_options,
    approval_options,
    arg,
    command,
)

if TYPE_CHECKING:
    from edgesync.cli._context import Ctx

__all__ = ["add_registry_parser", "run_api"]

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
_REVIEW_STATUSES = ["queued", "in_review", "approved", "rejected", "abandoned"]


def add_registry_parser(sub: Any) -> None:
    registry = command(sub, "registry", "registry coalescing: entries, registry reviews, "
                       "mirrors", "Registry coalescing (policy schema_coalescing_mode project "
                       "or fleet): one schema decision, and one coalesced target, per project "
                       "or fleet.", api=False)
    rsub = registry.add_subparsers(dest="registry_command", required=True, metavar="ACTION")
    command(rsub, "list", "list registry entries", "List the schema registry entries.",
            arg("--status", choices=["pending", "approved", "rejected", "abandoned"]),
            fleet=True, pages=True)
    command(rsub, "show", "show a registry entry and its devices",
            "Show one registry entry with the device lineages linked to it.",
            arg("registry_id", type=uuid.UUID), fleet=True)
    command(rsub, "reviews", "list registry reviews", "List registry reviews.",
            arg("--status", choices=_REVIEW_STATUSES), fleet=True, pages=True)
    command(rsub, "review-show", "show a registry review: columns, waiting devices",
            "Show one registry review with its schema columns and waiting devices.",
            REVIEW_ID, fleet=True)

    claim = command(rsub, "claim", "claim a queued registry review (queued → in_review)",
                    "Claim a registry review, so you can approve or reject it.", api=False)
    approve = command(
        rsub, "approve", "claim (if queued) and approve a registry review",
        "Approve a registry review, claiming it first when it is queued: provision the "
        "coalesced target and approve every waiting device. Column actions as for 'reviews "
        "approve' (--actions FILE, --mirror, --ignore, --map, --auto-map); defer is refused "
        "at registry scope. A column neither names gets the review's suggested action "
        "(the scope's last approved decision for the table), or with --mirror-all is "
        "mirrored.",
        arg("--actions", type=Path, help="JSON file with a list of column actions"),
        arg("--mirror", action="append", default=[], metavar="COL[:NAME]",
            help="mirror COL (as NAME in the target table); repeatable"),
        arg("--ignore", action="append", default=[], metavar="COL",
            help="do not sync COL; repeatable"), api=False)
    approval_options(approve)
    reason = arg("--reason", default=None)
    reject = command(rsub, "reject", "reject a registry review",
                     "Reject the schema for the whole scope: waiting devices stay paused and "
                     "staging, and so will devices that send it later.", reason, api=False)
    abandon = command(rsub, "abandon", "abandon a registry review (back to device reviews)",
                      "Give the schema back to per-device reviews: each waiting device gets "
                      "a device review.", reason, api=False)
    for p in (claim, approve, reject, abandon):
        for a in (REVIEW_ID, ACTION_VERSION, FLEET_ID):
            a.add_to(p)
        api_options(p)

    command(rsub, "mirrors", "list coalesced mirrors (shared targets)",
            "List the coalesced mirrors: one shared target per scope and table.",
            fleet=True, pages=True)
    command(rsub, "mirror-show", "show a coalesced mirror", "Show one coalesced mirror.",
            arg("mirror_id", help="the mirror's id: its target table name"), fleet=True)
    command(rsub, "consolidate",
            "move device-scoped lineages of a table into its coalesced mirror",
            "Consolidate: for a project switched from schema_coalescing_mode none to "
            "project or fleet, move every device lineage of SOURCE_TABLE that still "
            "writes to its own target (and whose approved schema is approved in the "
            "registry) into the coalesced mirror: its rows and tombstones are copied, "
            "it is re-bound to the registry's column actions, and its old table is kept. "
            "Lineages that cannot move are listed with the reason. Running it again "
            "moves nothing more. With --fleet-id: only that fleet's devices.",
            arg("source_table", help="the devices' source table"), fleet=True)


def _write_review(ctx: Ctx, data: dict[str, Any]) -> None:
    from edgesync.cli._context import write_review_head, write_suggestions

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


def run_api(ctx: Ctx) -> None:
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
        from edgesync.cli._context import flagged_actions

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
