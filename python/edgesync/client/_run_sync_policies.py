"""``edgesync sync-policies …`` over the HTTP API."""

from __future__ import annotations

from typing import Any

from edgesync.client._context import Ctx
from edgesync.client._format import print_fields, print_table
from edgesync.errors import ConfigError

__all__ = ["parse_table_spec", "sync_policies_command"]

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


def sync_policies_command(ctx: Ctx) -> None:
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
