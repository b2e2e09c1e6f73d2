"""A console's connection for the tests: a device (with its application database and
agent configuration) in a project, and an admin token of a fresh organization for it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

import asyncpg
from kits.e2e_kit import Device, pool_of, register

from edgesync import identity
from edgesync.server import Server
from edgesync.tui import EdgesyncTui, TuiSettings

__all__ = ["Console", "make_console"]


@dataclass
class Console:
    """Where a console connects, for one device's project."""

    server: Server
    device: Device
    settings: TuiSettings

    @property
    def pool(self) -> asyncpg.Pool:
        return pool_of(self.server)

    def app(self) -> EdgesyncTui:
        return EdgesyncTui(self.settings)


async def make_console(server: Server, tmp_path: Path, mqtt_url: str, tag: str,
                       **register_options: object) -> Console:
    unique = uuid.uuid4().hex[:8]
    pool = pool_of(server)
    device = await register(pool, tmp_path, mqtt_url, unique, tag=tag,
                            **register_options)  # type: ignore[arg-type]
    async with pool.acquire() as conn:
        boot = await identity.bootstrap(conn, org=f"org-{tag}-{unique}",
                                        project=f"e2e-{tag}-{unique}",
                                        topic_slug=f"e2e-{tag}-{unique}")
    assert boot.project_id == device.scope.project_id
    assert server.api is not None
    return Console(server, device, TuiSettings(api_url=server.api.url, token=boot.token.token,
                                               org_id=str(boot.org_id),
                                               project=str(boot.project_id)))
