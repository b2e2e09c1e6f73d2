"""``edgesync sync-policies …`` (over the HTTP API): a project's table strategies for its
agents, created from a sample database, attached to devices and fleets."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgesync.cli._format import print_fields, print_table
from edgesync.cli._options import api_options, arg, command
from edgesync.errors import ConfigError

if TYPE_CHECKING:
    from edgesync.cli._context import Ctx

__all__ = ["add_sync_policies_parser", "parse_table_spec", "run_api"]

_POLICY_COLUMNS = [("id", "id"), ("name", "name"), ("version", "version"),
                   ("tables", "tables"), ("updated_at", "updated")]
_FIELDS = ["id", "name", "description", "version", "created_at", "updated_at"]
_STRATEGY_COLUMNS = [("table", "table"), ("strategy", "strategy"), ("ts_column", "ts column"),
                     ("include_columns", "include columns")]
_DEVICE_COLUMNS = [("name", "device"), ("attached_via", "via"), ("delivery", "delivery"),
                   ("delivered_version", "version"), ("acked_at", "acked")]
_ATTACHMENT_COLUMNS = [("attached_to", "to"), ("name", "name"), ("device_id", "device id"),
                       ("fleet_id", "fleet id"), ("created_at", "attached")]
_TABLE_COLUMNS = [("name", "table"), ("row_count", "rows"), ("columns", "columns"),
                  ("suggested", "suggested"), ("reason", "why")]


_TABLE = arg("--table", action="append", default=[], metavar="TABLE=STRATEGY",
             help="TABLE=STRATEGY: rows, ignore, or telemetry:TS_COLUMN[:COL,COL…] (the "
                  "include_columns); repeatable")
_POLICY_ID = arg("policy_id")


def add_sync_policies_parser(sub: Any) -> None:
    sp = command(sub, "sync-policies", "table strategies for agents: create from a sample "
                 ".db, attach to devices or fleets",
                 "Sync policies: a project's table_strategies (rows / telemetry / ignore) for "
                 "its agents, written into device bundles and sent to attached agents that "
                 "opted in (remote_policy: true, docs/agent.md).", api=False)
    ssub = sp.add_subparsers(dest="sync_policies_command", required=True, metavar="ACTION")
    command(ssub, "list", "list sync policies", "List the project's sync policies.",
            pages=True)
    command(ssub, "show", "show a policy and the devices it governs",
            "Show one sync policy, its table strategies and its devices (with whether "
            "the latest change reached them).", _POLICY_ID)
    command(ssub, "introspect", "list a sample database's tables and suggested strategies",
            "Send a sample SQLite database to the API (nothing is stored) and print its "
            "tables, columns and a suggested strategy each.",
            arg("file", type=Path, help="the sample .db file"))
    command(ssub, "create", "create a sync policy",
            "Create a sync policy. --from-db starts from the suggestions of a sample "
            "database (and checks every table and column against it); --table sets or "
            "overrides one table's strategy.", arg("name"), arg("--description", default=""),
            arg("--from-db", type=Path, default=None, help="a sample .db file"), _TABLE)
    command(ssub, "update", "change a sync policy (attached agents that opted in apply it)",
            "Change a policy: --table sets a table's strategy, --remove-table drops it "
            "from the policy (the agent then replicates it as rows).", _POLICY_ID,
            arg("--name", default=None), arg("--description", default=None), _TABLE,
            arg("--remove-table", action="append", default=[], metavar="TABLE"))
    command(ssub, "delete", "delete a sync policy",
            "Delete a policy; its devices fall back to their fleet's policy, or none.",
            _POLICY_ID)
    command(ssub, "attachments", "list the devices and fleets a policy is attached to",
            "List a policy's attachments: each device or fleet, by name, and when "
            "it was attached (a fleet without devices too).", _POLICY_ID)
    for action, what in (("attach", "attach to a device or a fleet"),
                         ("detach", "detach from a device or a fleet")):
        p = command(ssub, action, what, what[0].upper() + what[1:] + ".", _POLICY_ID,
                    api=False)
        g = p.add_mutually_exclusive_group(required=True)
        g.add_argument("--device-id", default=None, help="a device (its id)")
        g.add_argument("--fleet-id", default=None, help="a fleet (its id): every device in "
                                                        "it without a policy of its own")
        api_options(p)


def parse_table_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``TABLE=rows``, ``TABLE=ignore``, ``TABLE=telemetry:TS[:A,B]`` → a strategies entry."""
    table, sep, rest = spec.partition("=")
    strategy, _, more = rest.partition(":")
    if not sep or not table or strategy not in ("rows", "telemetry", "ignore"):
        raise ConfigError("--table", f"{spec!r} is not TABLE=rows, TABLE=ignore or "
                                     "TABLE=telemetry:TS_COLUMN[:COL,COL]")
    if strategy != "telemetry":
        if more:
            raise ConfigError("--table", f"{spec!r}: only telemetry takes :TS_COLUMN")
        return table, {"strategy": strategy}
    ts, _, cols = more.partition(":")
    if not ts:
        raise ConfigError("--table", f"{spec!r}: telemetry needs :TS_COLUMN")
    entry: dict[str, Any] = {"strategy": "telemetry", "ts_column": ts}
    if cols:
        entry["include_columns"] = [c for c in cols.split(",") if c]
    return table, entry


def _strategy_rows(strategies: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"table": t, "strategy": s["strategy"], "ts_column": s.get("ts_column"),
             "include_columns": ",".join(s.get("include_columns") or []) or None}
            for t, s in sorted(strategies.items())]


def _write_policy(ctx: Ctx, data: dict[str, Any], devices: list[dict[str, Any]] | None = None
                  ) -> None:
    if ctx.json:
        ctx.item(data if devices is None else {**data, "devices": devices}, [])
        return
    print_fields(data, _FIELDS, ctx.out)
    ctx.section("table strategies (other tables: rows)",
                _strategy_rows(data["table_strategies"]), _STRATEGY_COLUMNS)
    if devices is not None:
        ctx.section("devices", devices, _DEVICE_COLUMNS)


def _read(path: Any) -> bytes:
    try:
        return bytes(path.read_bytes())
    except OSError as exc:
        raise ConfigError(str(path), f"cannot read: {exc.strerror or exc}") from exc


def run_api(ctx: Ctx) -> None:
    a, api = ctx.args, ctx.api
    cmd = a.sync_policies_command
    if cmd == "list":
        doc = api.sync_policies(**ctx.paging())
        for p in doc["data"]:
            p["tables"] = len(p["table_strategies"])
        ctx.page(doc, _POLICY_COLUMNS)
    elif cmd == "show":
        _write_policy(ctx, api.sync_policy(a.policy_id), api.sync_policy_devices(a.policy_id))
    elif cmd == "introspect":
        data = api.introspect_sample(_read(a.file))
        if ctx.json:
            ctx.item(data, [])
            return
        rows = [{**t, "columns": ", ".join(f"{c['name']} {c['type']}".strip()
                                           for c in t["columns"]),
                 "suggested": t["suggested"]["strategy"] + (
                     f":{t['suggested']['ts_column']}" if "ts_column" in t["suggested"] else "")}
                for t in data["tables"]]
        print_table(rows, _TABLE_COLUMNS, ctx.out)
    elif cmd == "create":
        body: dict[str, Any] = {"name": a.name, "description": a.description,
                                "table_strategies": {}}
        if a.from_db is not None:
            intro = api.introspect_sample(_read(a.from_db))
            body["table_strategies"] = intro["table_strategies"]
            body["sample_tables"] = intro["sample_tables"]
        body["table_strategies"].update(dict(parse_table_spec(s) for s in a.table))
        _write_policy(ctx, api.create_sync_policy(body))
    elif cmd == "update":
        changes: dict[str, Any] = {k: v for k, v in (("name", a.name),
                                                     ("description", a.description))
                                   if v is not None}
        if a.table or a.remove_table:
            strategies = dict(api.sync_policy(a.policy_id)["table_strategies"])
            strategies.update(dict(parse_table_spec(s) for s in a.table))
            for table in a.remove_table:
                if strategies.pop(table, None) is None:
                    raise ConfigError("--remove-table", f"{table!r} is not in the policy")
            changes["table_strategies"] = strategies
        if not changes:
            raise ConfigError("update", "nothing to change: give --table, --remove-table, "
                                        "--name or --description")
        _write_policy(ctx, api.update_sync_policy(a.policy_id, changes))
    elif cmd == "attachments":
        found = api.sync_policy_attachments(a.policy_id)
        if ctx.json:
            ctx.item(found, [])
        else:
            print_table(found, _ATTACHMENT_COLUMNS, ctx.out)
    elif cmd == "delete":
        ctx.item(api.delete_sync_policy(a.policy_id), ["id", "deleted"])
    else:
        data = api.attach_sync_policy(a.policy_id, cmd, device_id=a.device_id,
                                      fleet_id=a.fleet_id)
        ctx.item(data, [k for k in ("id", "policy_id", "device_id", "fleet_id", "created_at",
                                    "detached") if k in data])
