"""What each CLI subcommand does, kept apart from argument parsing."""

from __future__ import annotations

import argparse
import gc
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgesync.errors import ConfigError
from edgesync.protocol import TlsFiles

if TYPE_CHECKING:
    from edgesync import governance

__all__ = ["admin", "agent_run", "agent_status", "agent_validate", "credentials",
           "events_watch", "print_table_of", "serve"]

_log = logging.getLogger("edgesync")

# Generation 0 collected every 20,000 allocations (700 by default), each older generation
# after 50 and 100 collections of the one below.
GC_THRESHOLDS = (20_000, 50, 100)


async def serve(args: argparse.Namespace) -> None:
    from edgesync.server import Server, ServerSettings, default_data_dir

    tls = None
    if args.mqtt_ca or args.mqtt_cert or args.mqtt_key:
        tls = TlsFiles(args.mqtt_ca, args.mqtt_cert, args.mqtt_key)
    settings = ServerSettings(
        database_url=args.database_url, mqtt_url=args.mqtt_url,
        data_dir=args.data_dir or default_data_dir(),
        embedded_mqtt_port=args.embedded_mqtt_port or None,
        shared_group=args.shared_group, tls=tls, api_host=args.api_host,
        api_port=args.api_port, public_url=args.public_url, amqp_url=args.amqp_url,
        amqp_queue=args.amqp_queue, amqp_prefetch=args.amqp_prefetch,
        broker_config_out=args.broker_config_out, broker_pid_file=args.broker_pid_file,
        confirm_after_replica=args.confirm_after_replica)
    if args.client_id:
        settings.client_id = args.client_id
    async with Server(settings) as server:
        _log.info("serving: broker %s as %s%s", server.broker, settings.client_id,
                  f"; ingest from AMQP {server.ingest}" if settings.amqp_url else "")
        if server.api is not None:  # where to point agents, the CLI and a browser
            _log.info("edgesync serve ready: devices connect to %s; operator commands: "
                      "EDGESYNC_API_URL=%s; web console: %s/console", server.broker,
                      server.api.url, server.api.url)
        # What start-up built (modules, the app, pools) lives as long as the process: out
        # of the collector's sight, a full collection no longer walks it (a pause of tens
        # of milliseconds in every batch committed meanwhile).
        gc.freeze()
        # A group of batches allocates thousands of short-lived containers, nearly none
        # in a cycle (a fleet run: ~5,000 objects found by the collector in 50,000
        # batches), so collecting every 700 allocations bought nothing: 10% of the
        # worker's CPU under load went to the collector (perf), 0.1% with these.
        gc.set_threshold(*GC_THRESHOLDS)
        await server.run()


def events_watch(args: argparse.Namespace) -> int:
    from edgesync.api._watch import watch_events

    try:
        return watch_events(args.api_url, token=args.token, org_id=args.org_id,
                            project_id=args.project, after=args.after,
                            max_events=args.max_events)
    except KeyboardInterrupt:
        return 0


def agent_validate(path: Path) -> int:
    from edgesync.agent import validate_config

    problems = validate_config(path)
    for problem in problems:
        # A problem of the file itself names it already (not "f.yaml: f.yaml: …").
        print(problem if problem.startswith(f"{path}: ") else f"{path}: {problem}")
    if not problems:
        print(f"{path}: OK")
    return 1 if problems else 0


def agent_status(path: Path, output: str) -> int:
    """``edgesync agent status``: the device's own view, from its state.db."""
    import sys

    import orjson

    from edgesync.agent import device_status, load_config, write_status

    status = device_status(load_config(path).replication.state_db_path)
    if output == "json":
        sys.stdout.write(orjson.dumps(status, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        write_status(status, sys.stdout)
    return 0


async def agent_run(path: Path) -> None:
    from edgesync._version import version
    from edgesync.agent import Agent, load_config
    from edgesync.protocol import parse_broker_url

    config = load_config(path)
    # Logged once it opened: an agent refused at the start says only why (the CLI's
    # one-line error), not "starting" and "stopped" around it.
    async with Agent(config) as agent:
        _log.info("edgesync %s agent started: device %s, source %s, broker %s", version(),
                  config.connection.device_id, config.replication.source_db_path,
                  parse_broker_url(config.connection.server_url))  # no password
        try:
            await agent.run()
        finally:
            _log.info("edgesync agent stopped")


def _database(args: argparse.Namespace) -> tuple[str | None, Path]:
    """The database a database-direct command works on: --database-url, else the embedded
    PostgreSQL of --data-dir, else the one ``edgesync serve`` keeps in the default data
    directory. Never a new embedded server: a typo'd or forgotten option would otherwise
    start an empty database and issue credentials nobody's broker knows."""
    from edgesync.server import default_data_dir
    from edgesync.store import check_database_url

    if args.database_url:
        check_database_url(args.database_url, "--database-url")
    if args.database_url or args.data_dir:
        return args.database_url, args.data_dir or default_data_dir()
    data_dir = default_data_dir()
    if not (data_dir / "postgres").is_dir():
        raise ConfigError("--database-url", "no database to work on: give --database-url URL, "
                          "or --data-dir DIR where `edgesync serve` keeps its embedded "
                          f"PostgreSQL (there is none in the default {data_dir})")
    return None, data_dir


async def credentials(args: argparse.Namespace) -> Any:
    """``devices credentials|bundle|revoke``, ``jitr …`` and ``broker-config``."""
    from edgesync.credentials._cli import credentials_command
    from edgesync.store import open_database

    async with open_database(*_database(args)) as pool, pool.acquire() as conn:
        return await credentials_command(conn, args)


async def admin(args: argparse.Namespace) -> Any:
    from edgesync import fleet, governance, staging
    from edgesync.store import open_database

    async with open_database(*_database(args)) as pool, pool.acquire() as conn:
        if args.command == "admin":
            from edgesync.identity._admin import admin_command

            return await admin_command(conn, args)
        if args.command == "devices" and args.devices_command == "add":
            if not args.project:
                raise ConfigError("--project", "with --database-url, name the project")
            scope = await fleet.add_device(conn, project=args.project, name=args.name,
                                           topic_slug=args.topic_slug, fleet=args.fleet)
            return {"device_id": scope.device_id, "name": scope.device_name,
                    "project_id": scope.project_id, "fleet_id": scope.fleet_id,
                    "root_topic": scope.root_topic}
        if args.command == "devices":
            return [dict(r) for r in await conn.fetch(
                "SELECT d.id, d.name, p.name AS project, p.topic_slug, f.name AS fleet, "
                "s.last_seen_at, s.online, s.report->>'state' AS agent_state "
                "FROM edge_devices d JOIN edge_projects p ON p.id = d.project_id "
                "LEFT JOIN edge_fleets f ON f.id = d.fleet_id "
                "LEFT JOIN edge_device_status s ON s.device_id = d.id ORDER BY p.name, d.name")]
        if args.command == "lineages":
            return [dict(r) for r in await conn.fetch(
                "SELECT l.id, d.name AS device, l.source_table, l.pipeline, l.status, "
                "l.pause_reason, l.target_table, l.staged_rows, l.materialized_rows, "
                "l.rejected_batches, l.materialization_errors, l.last_error "
                "FROM edge_table_lineages l JOIN edge_devices d ON d.id = l.device_id "
                "ORDER BY d.name, l.source_table")]
        if args.reviews_command == "list":
            return [_review_summary(r) for r in
                    await governance.list_reviews(conn, status=args.status)]
        if args.reviews_command == "approve":
            return _review_summary(await approve(conn, args.review_id, args.actor,
                                                 await _db_actions(conn, args),
                                                 args.sync_authority))
        review = await governance.get_review(conn, args.review_id)
        async with conn.transaction():
            rejected = await governance.reject_review(
                conn, args.review_id, actor=args.actor,
                action_version=review.action_version, reason=args.reason)
            await staging.label_schema_rejected(conn, rejected.lineage_id, rejected.schema_hash)
        return _review_summary(rejected)


async def approve(conn: Any, review_id: Any, actor: str,
                  actions: list[dict[str, Any]] | None,
                  sync_authority: str | None = None) -> governance.Review:
    """Claim a queued review, then approve it (the CLI's one-step approval)."""
    from edgesync import governance

    review = await governance.get_review(conn, review_id)
    if review.status == governance.ReviewStatus.QUEUED:
        review = await governance.claim_review(conn, review_id, actor=actor,
                                               action_version=review.action_version)
    return await governance.approve_review(conn, review_id, actor=actor,
                                           action_version=review.action_version,
                                           column_actions=actions, sync_authority=sync_authority)


async def _db_actions(conn: Any, args: argparse.Namespace) -> list[dict[str, Any]] | None:
    """Column actions from --actions and the --mirror/--ignore/--defer flags."""
    from edgesync import governance
    from edgesync.client._actions import column_actions

    if args.actions is None and not (args.mirror or args.ignore or args.defer or args.map
                                     or args.auto_map):
        return None
    review = await governance.get_review(conn, args.review_id)
    names = [str(c["name"]) for c in review.columns]
    return column_actions(names, actions_file=args.actions, mirror=args.mirror,
                          ignore=args.ignore, defer=args.defer, map_=args.map,
                          auto_map=args.auto_map)


def print_table_of(result: Any) -> None:
    """``--output table`` for the database-direct commands."""
    import sys

    from edgesync.client._format import print_fields, print_table

    if isinstance(result, list):
        keys = list(dict.fromkeys(k for r in result for k in r if k != "diff"))
        print_table(result, [(k, k) for k in keys], sys.stdout)
    else:
        print_fields(result, [k for k in result if k != "diff"], sys.stdout)


def _review_summary(r: governance.Review) -> dict[str, Any]:
    """The review as the database-direct commands print it (a JSON document)."""
    keys = ("id", "lineage_id", "device_name", "source_table", "schema_hash",
            "classification", "status", "action_version", "claimed_by", "decided_by", "created_at")
    out = {k: getattr(r, k) for k in keys}
    out["diff"] = r.diff
    return out
