"""What each CLI subcommand does, kept apart from argument parsing."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

import orjson

from edgesync.errors import ConfigError
from edgesync.protocol import TlsFiles

__all__ = ["admin", "agent_run", "agent_validate", "credentials", "events_watch", "serve"]

_log = logging.getLogger("edgesync")


async def serve(args: argparse.Namespace) -> None:
    from edgesync.server import Server, ServerSettings, default_data_dir

    tls = None
    if args.mqtt_ca or args.mqtt_cert:
        tls = TlsFiles(args.mqtt_ca, args.mqtt_cert, args.mqtt_key)
    settings = ServerSettings(
        database_url=args.database_url, mqtt_url=args.mqtt_url,
        data_dir=args.data_dir or default_data_dir(),
        embedded_mqtt_port=args.embedded_mqtt_port or None,
        shared_group=args.shared_group, tls=tls, api_host=args.api_host,
        api_port=args.api_port, public_url=args.public_url)
    async with Server(settings) as server:
        _log.info("serving: broker %s", server.broker)
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
        print(f"{path}: {problem}")
    if not problems:
        print(f"{path}: OK")
    return 1 if problems else 0


async def agent_run(path: Path) -> None:
    from edgesync.agent import Agent, load_config

    config = load_config(path)
    async with Agent(config) as agent:
        await agent.run()


async def credentials(args: argparse.Namespace) -> Any:
    """``devices credentials|bundle|revoke``, ``jitr …`` and ``broker-config``."""
    from edgesync.credentials._cli import credentials_command
    from edgesync.server import default_data_dir
    from edgesync.store import open_database

    async with open_database(args.database_url, args.data_dir or default_data_dir()) as pool, \
            pool.acquire() as conn:
        return await credentials_command(conn, args)


async def admin(args: argparse.Namespace) -> Any:
    from edgesync import governance, registry
    from edgesync.server import default_data_dir
    from edgesync.store import open_database

    data_dir = args.data_dir or default_data_dir()
    async with open_database(args.database_url, data_dir) as pool, pool.acquire() as conn:
        if args.command == "admin":
            from edgesync.identity._admin import admin_command

            return await admin_command(conn, args)
        if args.command == "devices" and args.devices_command == "add":
            scope = await registry.add_device(conn, project=args.project, name=args.name,
                                              topic_slug=args.topic_slug, fleet=args.fleet)
            return {"device_id": scope.device_id, "name": scope.device_name,
                    "project_id": scope.project_id, "fleet_id": scope.fleet_id,
                    "root_topic": scope.root_topic}
        if args.command == "devices":
            return [dict(r) for r in await conn.fetch(
                "SELECT d.id, d.name, p.name AS project, p.topic_slug, f.name AS fleet "
                "FROM edge_devices d JOIN edge_projects p ON p.id = d.project_id "
                "LEFT JOIN edge_fleets f ON f.id = d.fleet_id ORDER BY p.name, d.name")]
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
                                                 _load_actions(args.actions)))
        review = await governance.get_review(conn, args.review_id)
        return _review_summary(await governance.reject_review(
            conn, args.review_id, actor=args.actor, action_version=review["action_version"],
            reason=args.reason))


async def approve(conn: Any, review_id: Any, actor: str,
                  actions: list[dict[str, Any]] | None) -> dict[str, Any]:
    """Claim a queued review, then approve it (the CLI's one-step approval)."""
    from edgesync import governance

    review = await governance.get_review(conn, review_id)
    if review["status"] == "queued":
        review = await governance.claim_review(conn, review_id, actor=actor,
                                               action_version=review["action_version"])
    return await governance.approve_review(conn, review_id, actor=actor,
                                           action_version=review["action_version"],
                                           column_actions=actions)


def _load_actions(path: Path | None) -> list[dict[str, Any]] | None:
    if path is None:
        return None
    try:
        doc = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise ConfigError("--actions", f"cannot read {path}: {exc}") from exc
    if isinstance(doc, dict):
        doc = doc.get("column_actions")
    if not isinstance(doc, list):
        raise ConfigError("--actions", "expected a JSON list of column actions")
    return doc


def _review_summary(r: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "lineage_id", "source_table", "schema_hash", "classification", "status",
            "action_version", "claimed_by", "decided_by", "created_at")
    out = {k: r.get(k) for k in keys}
    out["diff"] = r.get("diff")
    return out
