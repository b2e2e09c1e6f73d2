"""Each broker test gets its own project (unique slug) and its own Mosquitto on free
ports, configured by ``edgesync broker-config`` (see broker_helpers)."""

from __future__ import annotations

import getpass
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from broker_helpers import Deployment, Mosquitto, free_port

from edgesync import fleet
from edgesync.credentials import BrokerConfigOptions


@pytest.fixture
async def deployment(pool: asyncpg.Pool, unique: str, tmp_path: Path
                     ) -> AsyncIterator[Deployment]:
    project, slug = f"broker-{unique}", f"b{unique}"
    async with pool.acquire() as conn:
        await fleet.ensure_project(conn, project, slug)
    ports: set[int] = set()
    while len(ports) < 3:
        ports.add(free_port())
    mtls, password, worker = sorted(ports)
    opts = BrokerConfigOptions(
        projects=[project], bind="127.0.0.1", mtls_port=mtls, password_port=password,
        worker_port=worker,
        worker_username=f"worker-{unique}",
        # started as root, mosquitto would switch to a user that cannot read tmp_path
        extra=[f"user {getpass.getuser()}", "log_dest stderr", "persistence false"])
    out = tmp_path / "broker"
    broker = Mosquitto(out / "mosquitto.conf", tmp_path / "mosquitto.log")
    dep = Deployment(pool, out, project, slug, opts, broker, tmp=tmp_path)
    yield dep
    await broker.stop()
