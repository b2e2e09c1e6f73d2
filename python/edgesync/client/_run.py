"""What the operator commands do over the HTTP API."""

from __future__ import annotations

import argparse
import sys
import uuid
from collections.abc import Callable
from typing import IO, Any

import orjson

from edgesync.client._actions import load_json_file
from edgesync.client._client import ApiClientError
from edgesync.client._context import (
    Ctx,
    flagged_actions,
    write_review_head,
    write_suggestions,
)
from edgesync.client._format import print_fields, print_json
from edgesync.client._run_governance import data_points_command, registry_command
from edgesync.client._run_quarantine import quarantine_command
from edgesync.client._run_recovery import (
    RECOVERY_COMMANDS,
    offer_command,
    recovery_command,
    write_offers,
    write_recovery,
)
from edgesync.client._run_sync_policies import sync_policies_command
from edgesync.errors import ConfigError

__all__ = ["run_api_command"]

_LINEAGE_COLUMNS = [("id", "id"), ("device_name", "device"), ("source_table", "table"),
                    ("pipeline", "pipeline"), ("status", "status"),
                    ("pause_reason", "reason"), ("staged_rows", "staged"),
                    ("materialized_rows", "row writes"),
                    ("materialization_errors", "errors"), ("freshness_seconds", "fresh")]
_REVIEW_COLUMNS = [("id", "id"), ("device_name", "device"), ("source_table", "table"),
                   ("classification", "classification"), ("status", "status"),
                   ("action_version", "version"), ("claimed_by", "claimed by"),
                   ("decided_by", "decided by"), ("created_at", "created")]
_DEVICE_COLUMNS = [("id", "id"), ("name", "name"), ("fleet", "fleet"),
                   ("root_topic", "root topic"), ("connected", "connected"),
                   ("last_seen_at", "last seen"), ("agent_version", "agent"),
                   ("journal_depth", "journal"),
                   ("oldest_unconfirmed_age_s", "oldest unconfirmed"),
                   ("created_at", "created")]
_OBSERVED_COLUMNS = [("device_name", "device"), ("source_table", "table"),
                     ("schema_hash", "schema hash"), ("sent", "sent"),
                     ("lineage_id", "lineage"), ("observed_at", "observed"),
                     ("received_at", "received")]
_REVIEW_FIELDS = ["id", "lineage_id", "device_id", "device_name", "source_table", "schema_hash",
                  "classification", "status", "action_version", "claimed_by", "decided_by",
                  "decision_reason", "created_at", "updated_at"]
_LINEAGE_FIELDS = ["id", "device_name", "device_id", "source_table", "pipeline", "status",
                   "pause_reason", "sync_authority", "target_table", "current_schema_hash",
                   "approved_schema_hash", "staged_rows", "staged_bytes", "materialized_rows",
                   "target_rows", "rejected_batches", "materialization_errors", "last_error",
                   "last_device_seen_at", "last_committed_at", "freshness_seconds",
                   "updated_at"]


def _lineages(ctx: Ctx) -> None:
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
        ctx.item(api.reopen_review(lid), _REVIEW_FIELDS, "review reopened")
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
        quarantine_command(ctx, lid)
    elif cmd in RECOVERY_COMMANDS:
        recovery_command(ctx, lid)
    else:
        rows = load_json_file(a.rows, "--rows")
        if isinstance(rows, dict):
            rows = rows.get("rows")
        if not isinstance(rows, list):
            raise ConfigError("--rows", 'expected a JSON list of {"pk", "values"} rows')
        device_id = a.device_id or api.lineage(lid)["device_id"]
        ctx.item(api.write_state_rows(str(device_id), lid, rows),
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
    write_recovery(ctx, data.get("recovery") or {})
    write_offers(ctx, str(data["id"]), data.get("recovery_offers") or [])


def _delete_lineage(ctx: Ctx, lid: str) -> None:
    if not ctx.args.yes:
        lineage = ctx.api.lineage(lid)
        sys.stderr.write(f"Delete the sync state of {lineage['device_name']}/"
                         f"{lineage['source_table']} ({lid})? Its state table stays. [y/N] ")
        sys.stderr.flush()
        answer = sys.stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            raise _Aborted()
    data = ctx.api.delete_lineage(lid)
    ctx.item(data, ["id", "deleted", "device_id", "source_table", "forget_control_id",
                    "device_will", "detail"], "lineage deleted")
    step = data.get("next_step")
    if step and not ctx.json:
        ctx.out.write(f"\nnext: {step['action']} ({step['reason']})\n    {step['detail']}\n"
                      f"    find it: edgesync lineages list --device-id {data['device_id']}\n"
                      f"    then:    {offer_command(step['action'], 'NEW_LINEAGE_ID')}\n")


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
        sys.stderr.write(f"Discard the staged rows ({which or 'all'}) of "
                         f"{lineage['device_name']}/{lineage['source_table']} ({lid}) for "
                         "good? [y/N] ")
        sys.stderr.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            raise _Aborted()
    ctx.item(ctx.api.discard_staged(lid, reason=a.reason, schema_hash=a.schema_hash),
             ["lineage_id", "discarded_batches", "discarded_rows"], "staged rows discarded")


class _Aborted(Exception):
    pass


def _reviews(ctx: Ctx) -> None:
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
        ctx.item(api.claim(rid, version), _REVIEW_FIELDS, "claimed")
    elif cmd == "approve":
        review = api.review(rid)
        actions = flagged_actions(ctx, review, a.defer)
        # A queued review is claimed by the approval itself (one transaction): a refused
        # approval leaves it as it was.
        version = a.action_version or review["action_version"]
        ctx.item(api.approve(rid, version, actions, a.sync_authority), _REVIEW_FIELDS,
                 "approved")
    else:
        version = a.action_version or api.review(rid)["action_version"]
        ctx.item(api.reject(rid, version, a.reason), _REVIEW_FIELDS, "rejected")


def _device_filter(device: str | None) -> dict[str, str]:
    """``--device``: a device id, or else its name."""
    if device is None:
        return {}
    try:
        return {"device_id": str(uuid.UUID(device))}
    except ValueError:
        return {"device_name": device}


def _write_review(ctx: Ctx, data: dict[str, Any]) -> None:
    write_review_head(ctx, data, _REVIEW_FIELDS)
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


def _policy_value(text: str) -> Any:
    if text in ("default", "null"):
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _policy(ctx: Ctx) -> None:
    if ctx.args.policy_command == "show":
        data = ctx.api.policy()
    else:
        changes = {}
        for change in ctx.args.changes:
            field, sep, value = change.partition("=")
            if not sep or not field:
                raise ConfigError("FIELD=VALUE", f"{change!r} is not FIELD=VALUE")
            changes[field] = _policy_value(value)
        data = ctx.api.set_policy(changes)
    ctx.item(data, sorted(data))


def _devices(ctx: Ctx) -> None:
    a = ctx.args
    if a.devices_command == "list":
        ctx.page(ctx.api.devices(fleet_id=a.fleet_id, **ctx.paging()), _DEVICE_COLUMNS)
    else:
        data = ctx.api.add_device(a.name, a.fleet)
        ctx.item(data, ["id", "name", "fleet", "fleet_id", "root_topic", "created_at"],
                 "device registered")


_COMMANDS: dict[str, Callable[[Ctx], None]] = {
    "lineages": _lineages, "reviews": _reviews, "policy": _policy, "devices": _devices,
    "registry": registry_command, "data-points": data_points_command,
    "sync-policies": sync_policies_command}


def run_api_command(args: argparse.Namespace, out: IO[str] | None = None) -> int:
    """Run one operator command over the API; 0 on success, 1 when a confirmation was
    declined. API errors raise ``ApiClientError`` (after printing the error envelope on
    stdout with ``--output json``)."""
    out = out or sys.stdout
    if args.output is None:
        args.output = "table"
    ctx = Ctx(args, out)
    try:
        _COMMANDS[args.command](ctx)
    except _Aborted:
        sys.stderr.write("edgesync: not deleted\n")
        return 1
    except ApiClientError as exc:
        if ctx.json:
            print_json({"error": {"code": exc.code, "message": exc.message,
                                  "field": exc.field, "status": exc.status,
                                  **({"refusals": list(exc.refusals)} if exc.refusals else {})}},
                       out)
        else:
            # A refused approval: every refused column with its fix, not only the first.
            for r in exc.refusals:
                sys.stderr.write(f"refused: {r['source_column_name'] or 'column_actions'}: "
                                 f"{r['code']}: {r['detail']}; fix: {r['fix']}\n")
        raise
    finally:
        ctx.client.close()
    return 0
