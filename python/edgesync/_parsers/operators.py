"""Parsers of the operator commands (``lineages``, ``reviews``, ``policy``, ``devices``);
the commands are ``edgesync.client._run``.

The commands that existed before the HTTP API (``devices add|list``, ``reviews
list|approve|reject``, ``lineages list``) still work on the database directly when
``--database-url`` or ``--data-dir`` is given; without them, and for every other
action, they call the HTTP API (docs/cli.md).
"""

from __future__ import annotations

import argparse
import os
import uuid
from pathlib import Path
from typing import Any

from edgesync._defaults import DEFAULT_API_URL
from edgesync._parsers.recovery import add_recovery_parsers

# edgesync.staging.STAGING_REASONS, spelled out: the HTTP client imports no server code
# (tests/cli/test_operator_args.py checks the two agree).
STAGING_REASONS = ("schema_review", "schema_rejected", "lineage_paused",
                   "materialization_failed")
# edgesync.control.SYNC_AUTHORITIES, spelled out for the same reason.
SYNC_AUTHORITIES = ("device_authoritative", "cloud_authoritative")

__all__ = ["MODE_NOTE", "add_data_points_parser", "add_devices_parsers", "add_lineages_parser",
           "add_policy_parser", "add_registry_parser", "add_reviews_parser", "add_tui_parser",
           "uses_database"]

MODE_NOTE = (
    "Over the HTTP API by default (--api-url / EDGESYNC_API_URL, --token / EDGESYNC_TOKEN, "
    "--org-id / EDGESYNC_ORG_ID, --project / EDGESYNC_PROJECT, a project id). Actions that "
    "take --database-url or --data-dir work on that database directly instead when one of "
    "them is given on the command line (EDGESYNC_DATABASE_URL alone does not switch). "
    "Output: readable tables, or --output json.")
_FORMATTER = argparse.RawDescriptionHelpFormatter


def uses_database(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "database_url", None) or getattr(args, "data_dir", None))


def _db_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--database-url", default=None,
                   help="work on this PostgreSQL directly instead of the HTTP API "
                        "(legacy JSON output)")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="work on the embedded PostgreSQL in this directory directly")


def _api_options(p: argparse.ArgumentParser, *, project: bool = True,
                 output: bool = True) -> None:
    g = p.add_argument_group("HTTP API")
    g.add_argument("--api-url", default=os.environ.get("EDGESYNC_API_URL", DEFAULT_API_URL),
                   help=f"API base URL (env EDGESYNC_API_URL; default {DEFAULT_API_URL})")
    g.add_argument("--token", default=os.environ.get("EDGESYNC_TOKEN"),
                   help="API token (env EDGESYNC_TOKEN)")
    g.add_argument("--org-id", default=os.environ.get("EDGESYNC_ORG_ID"),
                   help="organization id for the ORG-ID header (env EDGESYNC_ORG_ID)")
    if project:
        g.add_argument("--project", default=None,
                       help="project id, name or topic slug (env EDGESYNC_PROJECT)")
    if output:
        g.add_argument("--output", "-o", choices=["table", "json"], default=None,
                       help="table (default over the API) or json (default with "
                            "--database-url)")


def _paging(p: argparse.ArgumentParser) -> None:
    p.add_argument("--page", type=int, default=None, help="1-based page (default 1)")
    p.add_argument("--limit", type=int, default=None, help="items per page (default 50)")


def _sub(parent: Any, name: str, help_: str, description: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = parent.add_parser(
        name, help=help_, description=description, epilog=MODE_NOTE, formatter_class=_FORMATTER)
    return p


def add_devices_parsers(dsub: Any) -> None:
    add = _sub(dsub, "add", "register a device (creating its project/fleet if new)",
               "Register a device. Over the API: in --project (an id). With --database-url: "
               "--project names the project, created (with --topic-slug) when new.")
    add.add_argument("name", help="device name: its MQTT client id and topic segment")
    add.add_argument("--topic-slug", default="",
                     help="with --database-url: the project's topic slug (default empty)")
    add.add_argument("--fleet", default=None, help="fleet name")
    _db_options(add)
    _api_options(add)
    dlist = _sub(dsub, "list", "list devices", "List the project's devices (with "
                 "--database-url: every registered device).")
    dlist.add_argument("--fleet-id", default=None, help="only this fleet (API)")
    _paging(dlist)
    _db_options(dlist)
    _api_options(dlist)


def _map_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--map", action="append", default=[], metavar="COL=DATA_POINT",
                   help="send COL's values to a data point (its id, or its name over the API) "
                        "instead of a column; repeatable")
    p.add_argument("--auto-map", action="append", default=[], metavar="COL[:NAME]",
                   help="like --map, to a data point created (or reused) for it, named NAME "
                        "or COL; needs policy allow_auto_create_device_data_points; "
                        "repeatable")


def _mirror_all_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mirror-all", action="store_true",
                   help="ignore the review's suggested actions: a column no flag or file "
                        "names is mirrored under its own name (the API's default)")


def add_reviews_parser(sub: Any) -> None:
    reviews = _sub(sub, "reviews", "list, show, claim, approve and reject schema reviews",
                   "Operate the schema review workflow.")
    rsub = reviews.add_subparsers(dest="reviews_command", required=True, metavar="ACTION")
    rlist = _sub(rsub, "list", "list reviews", "List schema reviews.")
    rlist.add_argument("--status", choices=["queued", "in_review", "approved", "rejected",
                                            "abandoned"])
    rlist.add_argument("--lineage-id", default=None, help="only this lineage's reviews (API)")
    rlist.add_argument("--device", default=None, metavar="ID_OR_NAME",
                       help="only this device's reviews: its id or its name (API)")
    _paging(rlist)
    _db_options(rlist)
    _api_options(rlist)

    show = _sub(rsub, "show", "show a review: schema, diff, decision",
                "Show one schema review with its columns and diff.")
    show.add_argument("review_id", type=uuid.UUID)
    _api_options(show)

    claim = _sub(rsub, "claim", "claim a queued review (queued → in_review)",
                 "Claim a review, so you can approve or reject it.")
    claim.add_argument("review_id", type=uuid.UUID)
    claim.add_argument("--action-version", type=int, default=None,
                       help="the action_version you last saw (default: the current one)")
    _api_options(claim)

    approve = _sub(
        rsub, "approve", "claim (if queued) and approve a review",
        "Approve a schema review (a queued one is claimed in the same transaction, so a "
        "refused approval leaves it as it was). Column actions come from --actions FILE (a "
        "JSON list) and/or the flags --mirror/--ignore/--defer (which win over the file); a "
        "column neither names gets the review's suggested action (the last approval's "
        "decisions carried forward: 'reviews show' lists them), or with --mirror-all is "
        "mirrored under its own name.")
    approve.add_argument("review_id", type=uuid.UUID)
    approve.add_argument("--actions", type=Path,
                         help="JSON file with a list of column actions "
                              '([{"source_column_name": ..., "action": "mirror"|...}])')
    approve.add_argument("--mirror", action="append", default=[], metavar="COL[:NAME]",
                         help="mirror COL (as NAME in the target table); repeatable (API)")
    approve.add_argument("--ignore", action="append", default=[], metavar="COL",
                         help="do not sync COL; repeatable (API)")
    approve.add_argument("--defer", action="append", default=[], metavar="COL",
                         help="decide about COL later; repeatable (API)")
    _map_options(approve)
    _mirror_all_option(approve)
    approve.add_argument("--sync-authority", choices=SYNC_AUTHORITIES,
                         help="cloud_authoritative allows write-back (lineages write) (API)")
    approve.add_argument("--action-version", type=int, default=None,
                         help="the action_version you last saw (API; default: the current)")
    approve.add_argument("--actor", default=os.environ.get("USER", "operator"),
                         help="with --database-url: who decided (the API records the token's "
                              "principal)")
    _db_options(approve)
    _api_options(approve)

    reject = _sub(rsub, "reject", "reject a review",
                  "Reject a schema review; the lineage stays paused and rows stay staged.")
    reject.add_argument("review_id", type=uuid.UUID)
    reject.add_argument("--reason", default=None)
    reject.add_argument("--action-version", type=int, default=None,
                        help="the action_version you last saw (API; default: the current)")
    reject.add_argument("--actor", default=os.environ.get("USER", "operator"),
                        help="with --database-url: who decided")
    _db_options(reject)
    _api_options(reject)


def add_lineages_parser(sub: Any) -> None:
    lineages = _sub(sub, "lineages", "list, show, reset, discard staged rows, quarantined "
                    "rows, re-snapshot, verify, delete lineages; write back rows",
                    "Lineages: one per (device, source table).")
    lsub = lineages.add_subparsers(dest="lineages_command", required=True, metavar="ACTION")
    llist = _sub(lsub, "list", "list lineages", "List lineages and their counters.")
    llist.add_argument("--device-id", default=None, help="only this device (API)")
    llist.add_argument("--fleet-id", default=None, help="only this fleet (API)")
    llist.add_argument("--status", choices=["active", "paused"], default=None,
                       help="only active or paused lineages (API)")
    _paging(llist)
    _db_options(llist)
    _api_options(llist)

    observed = _sub(lsub, "observed", "tables devices observed (sync/schema/observe), sent "
                    "or not", "List the tables devices reported observing, with whether "
                    "each sent a batch (has a lineage). --unsent: only those that never did.")
    observed.add_argument("--device-id", default=None, help="only this device")
    observed.add_argument("--unsent", action="store_true",
                          help="only tables that never sent a batch")
    _paging(observed)
    _api_options(observed)

    show = _sub(lsub, "show", "show a lineage: counters, bindings, replay, errors",
                "Show one lineage in detail.")
    show.add_argument("lineage_id", type=uuid.UUID)
    _api_options(show)

    for name, what in (("staged-rows", "row operations waiting in staging"),
                       ("mirror-rows", "rows of the lineage's edge_state_* table")):
        p = _sub(lsub, name, what, f"List the {what}.")
        p.add_argument("lineage_id", type=uuid.UUID)
        _paging(p)
        _api_options(p)

    tele = _sub(lsub, "telemetry", "samples of a telemetry (edge_ts_*) lineage",
                "List telemetry samples in a time range, oldest first.")
    tele.add_argument("lineage_id", type=uuid.UUID)
    tele.add_argument("--from", dest="from_", default=None, metavar="TIME",
                      help="event_ts at or after (RFC 3339)")
    tele.add_argument("--to", default=None, metavar="TIME", help="event_ts before (RFC 3339)")
    tele.add_argument("--device-id", default=None,
                      help="another device sharing the target (default: the lineage's)")
    tele.add_argument("--columns", default=None, help="comma-separated data columns")
    _paging(tele)
    _api_options(tele)

    reopen = _sub(lsub, "reopen-review", "open a new review of a lineage paused by deferred "
                  "columns", "Open a new schema review of the lineage's approved schema, for "
                  "a lineage an approval with --defer columns left paused (deferred_columns); "
                  "approving it without defers resumes the lineage and replays its rows.")
    reopen.add_argument("lineage_id", type=uuid.UUID)
    _api_options(reopen)

    reset = _sub(lsub, "reset", "reset materialization (clear errors, replay, resume)",
                 "Clear the materialization error counter and circuit breaker, requeue failed "
                 "rows and schedule a replay.")
    reset.add_argument("lineage_id", type=uuid.UUID)
    _api_options(reset)

    discard = _sub(lsub, "discard-staged", "discard staged rows (all, by reason, by version)",
                   "Delete a lineage's staged batches for good: all of them, or only those "
                   "of one --reason and/or one --schema-hash (a schema version, e.g. a "
                   "rejected one). Prints how many batches and rows went. Asks first unless "
                   "--yes.")
    discard.add_argument("lineage_id", type=uuid.UUID)
    discard.add_argument("--reason", choices=STAGING_REASONS, default=None,
                         help="only batches staged for this reason")
    discard.add_argument("--schema-hash", default=None, metavar="HASH",
                         help="only batches staged under this schema version (64 hex digits)")
    discard.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    _api_options(discard)

    replay = _sub(lsub, "replay-rejected", "replay rows of rejected schema versions under "
                  "the approved one, when compatible",
                  "Check the lineage's rejected schema versions (or --schema-hash) against "
                  "its approved one and replay the staged rows of the compatible ones with "
                  "the approved bindings (the rule: docs/recovery.md). Prints each version, "
                  "whether it is compatible (else why), and how many batches and rows replay; "
                  "discard the others with discard-staged --schema-hash.")
    replay.add_argument("lineage_id", type=uuid.UUID)
    replay.add_argument("--schema-hash", default=None, metavar="HASH",
                        help="only this rejected version (64 hex digits)")
    replay.add_argument("--dry-run", action="store_true",
                        help="only say which versions are compatible; change nothing")
    _api_options(replay)

    auth = _sub(lsub, "sync-authority", "change an approved state table's sync authority",
                "Set who wins for a state table after its approval: cloud_authoritative "
                "allows write-back (lineages write); device_authoritative refuses it and the "
                "cloud forgets its row versions (docs/recovery.md, lkcv).")
    auth.add_argument("lineage_id", type=uuid.UUID)
    auth.add_argument("sync_authority", choices=SYNC_AUTHORITIES)
    auth.add_argument("--force", action="store_true",
                      help="to device_authoritative even while state_write controls are not "
                           "acknowledged by the device")
    _api_options(auth)

    _add_quarantine_parser(lsub)
    add_recovery_parsers(lsub, _sub, _api_options, _paging)

    delete = _sub(lsub, "delete", "remove the cloud sync state of a lineage",
                  "Delete a lineage's sync state (versions, reviews, bindings, staged rows, "
                  "pending controls); its edge_state_* table stays. Asks first unless --yes.")
    delete.add_argument("lineage_id", type=uuid.UUID)
    delete.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    _api_options(delete)

    write = _sub(lsub, "write", "write rows back to a cloud_authoritative state table",
                 "Upsert rows into a cloud_authoritative state table and send them to the "
                 "device. FILE is JSON: a list of {\"pk\": {...}, \"values\": {...}} (or "
                 "{\"rows\": [...]}); '-' reads standard input. 1 to 500 rows.")
    write.add_argument("lineage_id", type=uuid.UUID)
    write.add_argument("--rows", type=Path, required=True, metavar="FILE")
    write.add_argument("--device-id", default=None,
                       help="the lineage's device (default: looked up from the lineage)")
    _api_options(write)


def _add_quarantine_parser(lsub: Any) -> None:
    quar = _sub(lsub, "quarantine", "rows that could not be written: list, show, retry, "
                "discard", "Quarantined rows: a row PostgreSQL or the encoder refused is kept "
                "apart with why, while the rest of its batch and its lineage go on "
                "(docs/recovery.md).")
    qsub = quar.add_subparsers(dest="quarantine_command", required=True, metavar="ACTION")
    qlist = _sub(qsub, "list", "list a lineage's quarantined rows, oldest first",
                 "List quarantined rows: id, change, reason, status.")
    qlist.add_argument("lineage_id", type=uuid.UUID)
    qlist.add_argument("--status", choices=["open", "superseded", "retried"], default=None,
                       help="only rows of this status (default: all)")
    _paging(qlist)
    _api_options(qlist)

    show = _sub(qsub, "show", "show one quarantined row: payload, reason, attempts",
                "Show one quarantined row with the row as the device sent it.")
    retry = _sub(qsub, "retry", "write a quarantined row again (optionally edited)",
                 "Write a quarantined row again through the writer, as it is or with "
                 "--set COL=VALUE (VALUE as JSON: 42, 1.5, \"text\", null, or a bare word "
                 "for a string) and/or --values FILE (a JSON object) replacing values of "
                 "its row first. Refused again, it stays open with the new reason.")
    for p in (show, retry):
        p.add_argument("lineage_id", type=uuid.UUID)
        p.add_argument("row_id", type=int, help="quarantined row id (from list)")
    retry.add_argument("--set", action="append", default=[], metavar="COL=VALUE",
                       dest="set_values", help="replace COL's value; repeatable")
    retry.add_argument("--values", type=Path, default=None, metavar="FILE",
                       help="JSON object of new values ('-' reads standard input)")
    _api_options(show)
    _api_options(retry)

    retry_all = _sub(qsub, "retry-all", "write every open quarantined row of a lineage again",
                     "Retry every open quarantined row of the lineage as it is (after "
                     "fixing the cause, e.g. widening a column); prints how many were "
                     "written, refused again and found superseded.")
    retry_all.add_argument("lineage_id", type=uuid.UUID)
    _api_options(retry_all)

    discard = _sub(qsub, "discard", "delete a quarantined row, or all of a lineage's, for good",
                   "Delete one quarantined row (ROW_ID) or every one of the lineage (--all). "
                   "Asks first unless --yes.")
    discard.add_argument("lineage_id", type=uuid.UUID)
    discard.add_argument("row_id", type=int, nargs="?", default=None,
                         help="quarantined row id (or --all)")
    discard.add_argument("--all", action="store_true", dest="all_rows",
                         help="every quarantined row of the lineage")
    discard.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    _api_options(discard)


def add_policy_parser(sub: Any) -> None:
    policy = _sub(sub, "policy", "show or change the project's edge policy",
                  "The project's edge replication policy (docs/api.md lists the fields).")
    psub = policy.add_subparsers(dest="policy_command", required=True, metavar="ACTION")
    show = _sub(psub, "show", "show the effective policy", "Show the effective policy.")
    _api_options(show)
    set_ = _sub(psub, "set", "change policy fields",
                "Change policy fields: FIELD=VALUE, VALUE as JSON (true, 50000, \"fleet\") or "
                "a bare word; FIELD=default (or null) puts the field back to its default.")
    set_.add_argument("changes", nargs="+", metavar="FIELD=VALUE")
    _api_options(set_)


def _fleet_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fleet-id", default=None,
                   help="use the fleet-scoped routes of this fleet (/fleets/{id}/edge/...)")


def add_registry_parser(sub: Any) -> None:
    registry = _sub(sub, "registry", "registry coalescing: entries, registry reviews, mirrors",
                    "Registry coalescing (policy schema_coalescing_mode project or fleet): one "
                    "schema decision, and one coalesced target, per project or fleet.")
    rsub = registry.add_subparsers(dest="registry_command", required=True, metavar="ACTION")
    rlist = _sub(rsub, "list", "list registry entries", "List the schema registry entries.")
    rlist.add_argument("--status", choices=["pending", "approved", "rejected", "abandoned"])
    _fleet_option(rlist)
    _paging(rlist)
    _api_options(rlist)

    show = _sub(rsub, "show", "show a registry entry and its devices",
                "Show one registry entry with the device lineages linked to it.")
    show.add_argument("registry_id", type=uuid.UUID)
    _fleet_option(show)
    _api_options(show)

    reviews = _sub(rsub, "reviews", "list registry reviews", "List registry reviews.")
    reviews.add_argument("--status", choices=["queued", "in_review", "approved", "rejected",
                                              "abandoned"])
    _fleet_option(reviews)
    _paging(reviews)
    _api_options(reviews)

    rshow = _sub(rsub, "review-show", "show a registry review: columns, waiting devices",
                 "Show one registry review with its schema columns and waiting devices.")
    rshow.add_argument("review_id", type=uuid.UUID)
    _fleet_option(rshow)
    _api_options(rshow)

    claim = _sub(rsub, "claim", "claim a queued registry review (queued → in_review)",
                 "Claim a registry review, so you can approve or reject it.")
    approve = _sub(
        rsub, "approve", "claim (if queued) and approve a registry review",
        "Approve a registry review, claiming it first when it is queued: provision the "
        "coalesced target and approve every waiting device. Column actions as for 'reviews "
        "approve' (--actions FILE, --mirror, --ignore, --map, --auto-map); defer is refused "
        "at registry scope. A column neither names gets the review's suggested action "
        "(the scope's last approved decision for the table), or with --mirror-all is "
        "mirrored.")
    approve.add_argument("--actions", type=Path,
                         help="JSON file with a list of column actions")
    approve.add_argument("--mirror", action="append", default=[], metavar="COL[:NAME]",
                         help="mirror COL (as NAME in the target table); repeatable")
    approve.add_argument("--ignore", action="append", default=[], metavar="COL",
                         help="do not sync COL; repeatable")
    _map_options(approve)
    _mirror_all_option(approve)
    reject = _sub(rsub, "reject", "reject a registry review",
                  "Reject the schema for the whole scope: waiting devices stay paused and "
                  "staging, and so will devices that send it later.")
    abandon = _sub(rsub, "abandon", "abandon a registry review (back to device reviews)",
                   "Give the schema back to per-device reviews: each waiting device gets a "
                   "device review.")
    for p in (reject, abandon):
        p.add_argument("--reason", default=None)
    for p in (claim, approve, reject, abandon):
        p.add_argument("review_id", type=uuid.UUID)
        p.add_argument("--action-version", type=int, default=None,
                       help="the action_version you last saw (default: the current one)")
        _fleet_option(p)
        _api_options(p)

    mirrors = _sub(rsub, "mirrors", "list coalesced mirrors (shared targets)",
                   "List the coalesced mirrors: one shared target per scope and table.")
    _fleet_option(mirrors)
    _paging(mirrors)
    _api_options(mirrors)
    mshow = _sub(rsub, "mirror-show", "show a coalesced mirror", "Show one coalesced mirror.")
    mshow.add_argument("mirror_id", help="the mirror's id: its target table name")
    _fleet_option(mshow)
    _api_options(mshow)
    cons = _sub(rsub, "consolidate",
                "move device-scoped lineages of a table into its coalesced mirror",
                "Consolidate: for a project switched from schema_coalescing_mode none to "
                "project or fleet, move every device lineage of SOURCE_TABLE that still "
                "writes to its own target (and whose approved schema is approved in the "
                "registry) into the coalesced mirror: its rows and tombstones are copied, "
                "it is re-bound to the registry's column actions, and its old table is kept. "
                "Lineages that cannot move are listed with the reason. Running it again "
                "moves nothing more. With --fleet-id: only that fleet's devices.")
    cons.add_argument("source_table", help="the devices' source table")
    _fleet_option(cons)
    _api_options(cons)


def add_data_points_parser(sub: Any) -> None:
    points = _sub(sub, "data-points", "list and create device data points, read their values",
                  "Device data points: named, typed values that columns approved with map / "
                  "auto_create_and_map feed.")
    psub = points.add_subparsers(dest="data_points_command", required=True, metavar="ACTION")
    plist = _sub(psub, "list", "list data points", "List the project's data points.")
    _paging(plist)
    _api_options(plist)
    show = _sub(psub, "show", "show a data point", "Show one data point.")
    show.add_argument("data_point_id", type=uuid.UUID)
    _api_options(show)
    create = _sub(psub, "create", "create a data point", "Create a data point.")
    create.add_argument("name", help="unique in the project")
    create.add_argument("--type", dest="value_type", required=True,
                        choices=["integer", "real", "numeric", "text", "boolean", "blob",
                                 "json"])
    create.add_argument("--unit", default=None)
    _api_options(create)
    values = _sub(psub, "values", "values of a data point, oldest first",
                  "List a data point's values in a time range, oldest first.")
    values.add_argument("data_point_id", type=uuid.UUID)
    values.add_argument("--device-id", default=None, help="only this device's values")
    values.add_argument("--from", dest="from_", default=None, metavar="TIME",
                        help="ts at or after (RFC 3339)")
    values.add_argument("--to", default=None, metavar="TIME", help="ts before (RFC 3339)")
    _paging(values)
    _api_options(values)


def add_tui_parser(sub: Any) -> None:
    tui = sub.add_parser(
        "tui", help="the operator console in the terminal (lineages, reviews, rows)",
        description="The operator console (docs/tui.md): lineages, their staged and written "
                    "rows, schema reviews with per-column approval. A client of the HTTP API "
                    "with the same settings as the other operator commands.")
    _api_options(tui, output=False)
