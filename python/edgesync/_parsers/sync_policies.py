"""Parser of ``edgesync sync-policies …`` (over the HTTP API); the commands are
``edgesync.client._run_sync_policies``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgesync._parsers.operators import _api_options, _paging, _sub

__all__ = ["add_sync_policies_parser"]

_TABLE_HELP = ("TABLE=STRATEGY: rows, ignore, or telemetry:TS_COLUMN[:COL,COL…] (the "
               "include_columns); repeatable")


def _target(p: Any) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--device-id", default=None, help="a device (its id)")
    g.add_argument("--fleet-id", default=None, help="a fleet (its id): every device in it "
                                                    "without a policy of its own")


def add_sync_policies_parser(sub: Any) -> None:
    sp = _sub(sub, "sync-policies", "table strategies for agents: create from a sample .db, "
              "attach to devices or fleets",
              "Sync policies: a project's table_strategies (rows / telemetry / ignore) for its "
              "agents, written into device bundles and sent to attached agents that opted in "
              "(remote_policy: true, docs/agent.md).")
    ssub = sp.add_subparsers(dest="sync_policies_command", required=True, metavar="ACTION")
    lst = _sub(ssub, "list", "list sync policies", "List the project's sync policies.")
    _paging(lst)
    _api_options(lst)
    show = _sub(ssub, "show", "show a policy and the devices it governs",
                "Show one sync policy, its table strategies and its devices (with whether "
                "the latest change reached them).")
    show.add_argument("policy_id")
    _api_options(show)
    intro = _sub(ssub, "introspect", "list a sample database's tables and suggested strategies",
                 "Send a sample SQLite database to the API (nothing is stored) and print its "
                 "tables, columns and a suggested strategy each.")
    intro.add_argument("file", type=Path, help="the sample .db file")
    _api_options(intro)
    create = _sub(ssub, "create", "create a sync policy",
                  "Create a sync policy. --from-db starts from the suggestions of a sample "
                  "database (and checks every table and column against it); --table sets or "
                  "overrides one table's strategy.")
    create.add_argument("name")
    create.add_argument("--description", default="")
    create.add_argument("--from-db", type=Path, default=None, help="a sample .db file")
    create.add_argument("--table", action="append", default=[], metavar="TABLE=STRATEGY",
                        help=_TABLE_HELP)
    _api_options(create)
    update = _sub(ssub, "update", "change a sync policy (attached agents that opted in apply it)",
                  "Change a policy: --table sets a table's strategy, --remove-table drops it "
                  "from the policy (the agent then replicates it as rows).")
    update.add_argument("policy_id")
    update.add_argument("--name", default=None)
    update.add_argument("--description", default=None)
    update.add_argument("--table", action="append", default=[], metavar="TABLE=STRATEGY",
                        help=_TABLE_HELP)
    update.add_argument("--remove-table", action="append", default=[], metavar="TABLE")
    _api_options(update)
    delete = _sub(ssub, "delete", "delete a sync policy",
                  "Delete a policy; its devices fall back to their fleet's policy, or none.")
    delete.add_argument("policy_id")
    _api_options(delete)
    attachments = _sub(ssub, "attachments", "list the devices and fleets a policy is attached to",
                       "List a policy's attachments: each device or fleet, by name, and when "
                       "it was attached (a fleet without devices too).")
    attachments.add_argument("policy_id")
    _api_options(attachments)
    for action, what in (("attach", "attach to a device or a fleet"),
                         ("detach", "detach from a device or a fleet")):
        p = _sub(ssub, action, what, what[0].upper() + what[1:] + ".")
        p.add_argument("policy_id")
        _target(p)
        _api_options(p)
