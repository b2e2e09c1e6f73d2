"""``edgesync lineages …``: list, show, rows, reset, discard or replay staged rows, change
the sync authority, delete, write back (over the HTTP API; ``list`` also on the database
directly); their quarantine and recovery sub-commands are ``_quarantine`` and
``_recovery``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgesync.cli import _quarantine, _recovery
from edgesync.cli._confirm import confirm
from edgesync.cli._format import print_fields
from edgesync.cli._options import (
    LINEAGE_ID,
    STAGING_REASONS,
    SYNC_AUTHORITIES,
    arg,
    command,
)
from edgesync.cli._reviews import REVIEW_FIELDS
from edgesync.errors import ConfigError

if TYPE_CHECKING:
    import argparse

    from edgesync.cli._context import Ctx
    from edgesync.store import Conn

__all__ = ["add_lineages_parser", "run_api", "run_on_database"]

_LINEAGE_COLUMNS = [("id", "id"), ("device_name", "device"), ("source_table", "table"),
                    ("pipeline", "pipeline"), ("status", "status"),
                    ("pause_reason", "reason"), ("staged_rows", "staged"),
                    ("materialized_rows", "row writes"),
                    ("materialization_errors", "errors"), ("freshness_seconds", "fresh")]
_OBSERVED_COLUMNS = [("device_name", "device"), ("source_table", "table"),
                     ("schema_hash", "schema hash"), ("sent", "sent"),
                     ("lineage_id", "lineage"), ("observed_at", "observed"),
                     ("received_at", "received")]
_LINEAGE_FIELDS = ["id", "device_name", "device_id", "source_table", "pipeline", "status",
                   "pause_reason", "sync_authority", "target_table", "current_schema_hash",
                   "approved_schema_hash", "staged_rows", "staged_bytes", "materialized_rows",
                   "target_rows", "rejected_batches", "materialization_errors", "last_error",
                   "last_device_seen_at", "last_committed_at", "freshness_seconds",
                   "updated_at"]
_YES = arg("--yes", "-y", action="store_true", help="do not ask for confirmation")


def add_lineages_parser(sub: Any) -> None:
    lineages = command(sub, "lineages", "list, show, reset, discard staged rows, quarantined "
                       "rows, re-snapshot, verify, delete lineages; write back rows",
                       "Lineages: one per (device, source table).", api=False)
    lsub = lineages.add_subparsers(dest="lineages_command", required=True, metavar="ACTION")
    command(lsub, "list", "list lineages", "List lineages and their counters.",
            arg("--device-id", default=None, help="only this device (API)"),
            arg("--fleet-id", default=None, help="only this fleet (API)"),
            arg("--status", choices=["active", "paused"], default=None,
                help="only active or paused lineages (API)"), pages=True, database=True)
    command(lsub, "observed", "tables devices observed (sync/schema/observe), sent "
            "or not", "List the tables devices reported observing, with whether "
            "each sent a batch (has a lineage). --unsent: only those that never did.",
            arg("--device-id", default=None, help="only this device"),
            arg("--unsent", action="store_true", help="only tables that never sent a batch"),
            pages=True)
    command(lsub, "show", "show a lineage: counters, bindings, replay, errors",
            "Show one lineage in detail.", LINEAGE_ID)
    for name, what in (("staged-rows", "row operations waiting in staging"),
                       ("mirror-rows", "rows of the lineage's edge_state_* table")):
        command(lsub, name, what, f"List the {what}.", LINEAGE_ID, pages=True)
    command(lsub, "telemetry", "samples of a telemetry (edge_ts_*) lineage",
            "List telemetry samples in a time range, oldest first.", LINEAGE_ID,
            arg("--from", dest="from_", default=None, metavar="TIME",
                help="event_ts at or after (RFC 3339)"),
            arg("--to", default=None, metavar="TIME", help="event_ts before (RFC 3339)"),
            arg("--device-id", default=None,
                help="another device sharing the target (default: the lineage's)"),
            arg("--columns", default=None, help="comma-separated data columns"), pages=True)
    command(lsub, "reopen-review", "open a new review of a lineage paused by deferred "
            "columns", "Open a new schema review of the lineage's approved schema, for "
            "a lineage an approval with --defer columns left paused (deferred_columns); "
            "approving it without defers resumes the lineage and replays its rows.",
            LINEAGE_ID)
    command(lsub, "reset", "reset materialization (clear errors, replay, resume)",
            "Clear the materialization error counter and circuit breaker, requeue failed "
            "rows and schedule a replay.", LINEAGE_ID)
    command(lsub, "discard-staged", "discard staged rows (all, by reason, by version)",
            "Delete a lineage's staged batches for good: all of them, or only those "
            "of one --reason and/or one --schema-hash (a schema version, e.g. a "
            "rejected one). Prints how many batches and rows went. Asks first unless "
            "--yes.", LINEAGE_ID,
            arg("--reason", choices=STAGING_REASONS, default=None,
                help="only batches staged for this reason"),
            arg("--schema-hash", default=None, metavar="HASH",
                help="only batches staged under this schema version (64 hex digits)"), _YES)
    command(lsub, "replay-rejected", "replay rows of rejected schema versions under "
            "the approved one, when compatible",
            "Check the lineage's rejected schema versions (or --schema-hash) against "
            "its approved one and replay the staged rows of the compatible ones with "
            "the approved bindings (the rule: docs/recovery.md). Prints each version, "
            "whether it is compatible (else why), and how many batches and rows replay; "
            "discard the others with discard-staged --schema-hash.", LINEAGE_ID,
            arg("--schema-hash", default=None, metavar="HASH",
                help="only this rejected version (64 hex digits)"),
            arg("--dry-run", action="store_true",
                help="only say which versions are compatible; change nothing"))
    command(lsub, "sync-authority", "change an approved state table's sync authority",
            "Set who wins for a state table after its approval: cloud_authoritative "
            "allows write-back (lineages write); device_authoritative refuses it and the "
            "cloud forgets its row versions (docs/recovery.md, lkcv).", LINEAGE_ID,
            arg("sync_authority", choices=SYNC_AUTHORITIES),
            arg("--force", action="store_true",
                help="to device_authoritative even while state_write controls are not "
                     "acknowledged by the device"))
    _quarantine.add_quarantine_parser(lsub)
    _recovery.add_recovery_parsers(lsub)
    command(lsub, "delete", "remove the cloud sync state of a lineage",
            "Delete a lineage's sync state (versions, reviews, bindings, staged rows, "
            "pending controls); its edge_state_* table stays. Asks first unless --yes.",
            LINEAGE_ID, _YES)
    command(lsub, "write", "write rows back to a cloud_authoritative state table",
            "Upsert rows into a cloud_authoritative state table and send them to the "
            "device. FILE is JSON: a list of {\"pk\": {...}, \"values\": {...}} (or "
            "{\"rows\": [...]}); '-' reads standard input. 1 to 500 rows.", LINEAGE_ID,
            arg("--rows", type=Path, required=True, metavar="FILE"),
            arg("--device-id", default=None,
                help="the lineage's device (default: looked up from the lineage)"))


def run_api(ctx: Ctx) -> None:
    a, api = ctx.args, ctx.api
    cmd = a.lineages_command
    lid = str(getattr(a, "lineage_id", ""))
    if cmd == "list":
        ctx.page(api.lineages(device_id=a.device_id, fleet_id=a.fleet_id, status=a.status,
                              **ctx.paging()), _LINEAGE_COLUMNS)
    elif cmd == "observed":
        ctx.page(api.get_page("/edge/observations", device_id=a.device_id,
                              unsent="true" if a.unsent else None, **ctx.paging()),
                 _OBSERVED_COLUMNS)
    elif cmd == "show":
        ctx.detail(api.lineage(lid), _write_lineage)
    elif cmd in ("staged-rows", "mirror-rows"):
        doc = api.get_page(f"/edge/lineages/{lid}/{cmd}", **ctx.paging())
        _rows_page(ctx, doc)
    elif cmd == "telemetry":
        doc = api.telemetry(lid, **{"from": a.from_}, to=a.to, device_id=a.device_id,
                            columns=a.columns, **ctx.paging())
        _rows_page(ctx, doc)
    elif cmd == "reopen-review":
        ctx.item(api.reopen_review(lid), REVIEW_FIELDS, "review reopened")
    elif cmd == "reset":
        ctx.item(api.reset_materialization(lid),
                 ["lineage_id", "requeued_batches", "quarantined_rows"],
                 "materialization reset; replay scheduled")
    elif cmd == "delete":
        _delete_lineage(ctx, lid)
    elif cmd == "discard-staged":
        _discard_staged(ctx, lid)
    elif cmd == "replay-rejected":
        _replay_rejected(ctx, lid)
    elif cmd == "sync-authority":
        ctx.item(api.set_sync_authority(lid, a.sync_authority, force=a.force),
                 ["lineage_id", "sync_authority", "previous", "changed",
                  "pending_state_writes", "cloud_versions_cleared"],
                 "sync authority changed")
    elif cmd == "quarantine":
        _quarantine.run_api(ctx, lid)
    elif cmd in _recovery.RECOVERY_COMMANDS:
        _recovery.run_api(ctx, lid)
    else:
        _write_rows(ctx, lid)


def _write_rows(ctx: Ctx, lid: str) -> None:
    from edgesync.client._actions import load_json_file

    rows = load_json_file(ctx.args.rows, "--rows")
    if isinstance(rows, dict):
        rows = rows.get("rows")
    if not isinstance(rows, list):
        raise ConfigError("--rows", 'expected a JSON list of {"pk", "values"} rows')
    device_id = ctx.args.device_id or ctx.api.lineage(lid)["device_id"]
    ctx.item(ctx.api.write_state_rows(str(device_id), lid, rows),
             ["control_id", "rows_written", "source_table", "cloud_version"],
             "rows written; state_write queued for the device")


def _rows_page(ctx: Ctx, doc: dict[str, Any]) -> None:
    rows = doc["data"]
    keys: list[str] = list(dict.fromkeys(k for r in rows for k in r))
    ctx.page(doc, [(k, k) for k in keys])


def _write_lineage(ctx: Ctx, data: dict[str, Any]) -> None:
    print_fields(data, _LINEAGE_FIELDS, ctx.out)
    ctx.section("schema versions", data["schema_versions"],
                [("schema_hash", "schema hash"), ("classification", "classification"),
                 ("status", "status"), ("first_seen_at", "first seen")])
    ctx.section("bindings", data["bindings"],
                [("source_column_name", "column"), ("action", "action"),
                 ("mirror_column_name", "mirror column"), ("target_type", "type"),
                 ("schema_hash", "schema hash")])
    replay, mat = data["replay"], data["materialization"]
    ctx.out.write("\nreplay\n")
    print_fields(replay, ["pending_intents", "staged_batches", "staged_rows"], ctx.out)
    ctx.out.write("\nmaterialization\n")
    print_fields(mat, ["error_count", "last_error", "failed_batches", "failed_rows",
                       "quarantined_rows"], ctx.out)
    _recovery.write_recovery(ctx, data.get("recovery") or {})
    _recovery.write_offers(ctx, str(data["id"]), data.get("recovery_offers") or [])


def _delete_lineage(ctx: Ctx, lid: str) -> None:
    if not ctx.args.yes:
        lineage = ctx.api.lineage(lid)
        confirm(f"Delete the sync state of {lineage['device_name']}/"
                f"{lineage['source_table']} ({lid})? Its state table stays.")
    data = ctx.api.delete_lineage(lid)
    ctx.item(data, ["id", "deleted", "device_id", "source_table", "forget_control_id",
                    "device_will", "detail"], "lineage deleted")
    step = data.get("next_step")
    if step and not ctx.json:
        ctx.out.write(f"\nnext: {step['action']} ({step['reason']})\n    {step['detail']}\n"
                      f"    find it: edgesync lineages list --device-id {data['device_id']}\n"
                      f"    then:    "
                      f"{_recovery.offer_command(step['action'], 'NEW_LINEAGE_ID')}\n")


def _replay_rejected(ctx: Ctx, lid: str) -> None:
    a = ctx.args

    def write(ctx: Ctx, data: dict[str, Any]) -> None:
        print_fields(data, ["lineage_id", "approved_schema_hash", "dry_run",
                            "rebound_batches", "rebound_rows"], ctx.out)
        ctx.section("rejected versions",
                    [{**v, "reasons": "; ".join(v["reasons"]) or "-"}
                     for v in data["versions"]],
                    [("schema_hash", "schema hash"), ("compatible", "compatible"),
                     ("rebound", "replayed"), ("staged_batches", "batches"),
                     ("staged_rows", "rows"), ("reasons", "why not")])

    ctx.detail(ctx.api.replay_rejected(lid, schema_hash=a.schema_hash, dry_run=a.dry_run),
               write)


def _discard_staged(ctx: Ctx, lid: str) -> None:
    a = ctx.args
    if not a.yes:
        lineage = ctx.api.lineage(lid)
        which = " ".join(f for f in (a.reason and f"reason {a.reason}",
                                     a.schema_hash and f"schema {a.schema_hash[:12]}…") if f)
        confirm(f"Discard the staged rows ({which or 'all'}) of "
                f"{lineage['device_name']}/{lineage['source_table']} ({lid}) for good?")
    ctx.item(ctx.api.discard_staged(lid, reason=a.reason, schema_hash=a.schema_hash),
             ["lineage_id", "discarded_batches", "discarded_rows"], "staged rows discarded")


async def run_on_database(conn: Conn, args: argparse.Namespace) -> Any:
    from edgesync import operations

    return await operations.lineage_overview(conn)
