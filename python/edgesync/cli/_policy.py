"""``edgesync policy show|set`` (over the HTTP API): the project's edge replication
policy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from edgesync.cli._options import arg, command, json_or_text
from edgesync.errors import ConfigError

if TYPE_CHECKING:
    from edgesync.cli._context import Ctx

__all__ = ["add_policy_parser", "run_api"]


def add_policy_parser(sub: Any) -> None:
    policy = command(sub, "policy", "show or change the project's edge policy",
                     "The project's edge replication policy (docs/api.md lists the fields).",
                     api=False)
    psub = policy.add_subparsers(dest="policy_command", required=True, metavar="ACTION")
    command(psub, "show", "show the effective policy", "Show the effective policy.")
    command(psub, "set", "change policy fields",
            "Change policy fields: FIELD=VALUE, VALUE as JSON (true, 50000, \"fleet\") or "
            "a bare word; FIELD=default (or null) puts the field back to its default.",
            arg("changes", nargs="+", metavar="FIELD=VALUE"))


def _policy_value(text: str) -> Any:
    return None if text in ("default", "null") else json_or_text(text)


def run_api(ctx: Ctx) -> None:
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
