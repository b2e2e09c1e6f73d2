"""``edgesync devices add|list``: over the HTTP API, or on the database directly (the
device's credentials: ``edgesync.cli._credentials``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from edgesync.cli._options import arg, command
from edgesync.errors import ConfigError

if TYPE_CHECKING:
    import argparse

    from edgesync.cli._context import Ctx
    from edgesync.store import Conn

__all__ = ["add_devices_parsers", "run_api", "run_on_database"]

_DEVICE_COLUMNS = [("id", "id"), ("name", "name"), ("fleet", "fleet"),
                   ("root_topic", "root topic"), ("connected", "connected"),
                   ("last_seen_at", "last seen"), ("agent_version", "agent"),
                   ("journal_depth", "journal"),
                   ("oldest_unconfirmed_age_s", "oldest unconfirmed"),
                   ("created_at", "created")]


def add_devices_parsers(dsub: Any) -> None:
    command(dsub, "add", "register a device (creating its project/fleet if new)",
            "Register a device. Over the API: in --project (an id). With --database-url: "
            "--project names the project, created (with --topic-slug) when new.",
            arg("name", help="device name: its MQTT client id and topic segment"),
            arg("--topic-slug", default="",
                help="with --database-url: the project's topic slug (default empty)"),
            arg("--fleet", default=None, help="fleet name"), database=True)
    command(dsub, "list", "list devices", "List the project's devices (with "
            "--database-url: every registered device).",
            arg("--fleet-id", default=None, help="only this fleet (API)"),
            pages=True, database=True)


def run_api(ctx: Ctx) -> None:
    a = ctx.args
    if a.devices_command == "list":
        ctx.page(ctx.api.devices(fleet_id=a.fleet_id, **ctx.paging()), _DEVICE_COLUMNS)
    else:
        data = ctx.api.add_device(a.name, a.fleet)
        ctx.item(data, ["id", "name", "fleet", "fleet_id", "root_topic", "created_at"],
                 "device registered")


async def run_on_database(conn: Conn, args: argparse.Namespace) -> Any:
    from edgesync import fleet, operations

    if args.devices_command == "list":
        return await operations.device_overview(conn)
    if not args.project:
        raise ConfigError("--project", "with --database-url, name the project")
    scope = await fleet.add_device(conn, project=args.project, name=args.name,
                                      topic_slug=args.topic_slug, fleet=args.fleet)
    return {"device_id": scope.device_id, "name": scope.device_name,
            "project_id": scope.project_id, "fleet_id": scope.fleet_id,
            "root_topic": scope.root_topic}
