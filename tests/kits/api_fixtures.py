"""Fixtures for the HTTP API: an app on the session pool, tenants with tokens, and a
device whose first batch is waiting in review. ``tests/api`` (the routes) and
``tests/client`` (the operator CLI over HTTP) import them into their conftest."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

import edgesync.fleet
from edgesync import identity
from edgesync.api import create_app
from edgesync.api._serve import _Uvicorn, bind_socket
from edgesync.ingest import IngestPipeline
from kits.api_cli import Cli


@dataclass
class Tenant:
    org_id: uuid.UUID
    project_id: uuid.UUID
    slug: str
    project_name: str
    admin_token: str
    reader_token: str

    def headers(self, token: str | None = None, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.admin_token}",
                "ORG-ID": str(self.org_id), **extra}

    def reader(self, **extra: str) -> dict[str, str]:
        return self.headers(self.reader_token, **extra)

    def url(self, path: str) -> str:
        return f"/core/api/v1/projects/{self.project_id}{path}"


async def make_tenant(pool: asyncpg.Pool, tag: str) -> Tenant:
    async with pool.acquire() as conn:
        boot = await identity.bootstrap(conn, org=f"org-{tag}", project=f"proj-{tag}",
                                        topic_slug=f"slug-{tag}")
        reader = await identity.ensure_principal(conn, boot.org_id, f"reader-{tag}",
                                                 "service_account")
        await identity.grant(conn, reader, boot.project_id, identity.READ)
        reader_token = await identity.issue_token(conn, reader)
    return Tenant(boot.org_id, boot.project_id, f"slug-{tag}", f"proj-{tag}",
                  boot.token.token, reader_token.token)


@pytest.fixture
def tenant_factory() -> Callable[[asyncpg.Pool, str], Any]:
    return make_tenant


@pytest.fixture
async def tenant(pool: asyncpg.Pool, unique: str) -> Tenant:
    return await make_tenant(pool, unique)


@pytest.fixture
async def other_tenant(pool: asyncpg.Pool, unique: str) -> Tenant:
    return await make_tenant(pool, unique + "-other")


@pytest.fixture
def app(pool: asyncpg.Pool) -> FastAPI:
    return create_app(pool)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        yield c


@dataclass
class Staged:
    device: edgesync.fleet.DeviceScope
    lineage_id: uuid.UUID
    review_id: uuid.UUID


@pytest.fixture
def stage(pool: asyncpg.Pool, batches: Callable[..., Any]
          ) -> Callable[..., Any]:
    """Register a device in the tenant's project and send it a first batch: the lineage
    pauses with a queued review (a device review; ``review_id`` is None when the project
    coalesces and a registry review decides)."""

    async def _stage(tenant: Tenant, name: str = "gw-1", table: str = "device_state",
                     fleet: str | None = None) -> Staged:
        async with pool.acquire() as conn:
            device = await edgesync.fleet.add_device(conn, project=tenant.project_name, name=name,
                                                     topic_slug=tenant.slug, fleet=fleet)
        f = batches(table)
        rows = f.rows(("insert", {"id": 1, "mode": "heat", "setpoint": 20.5}),
                      ("insert", {"id": 2, "mode": "cool", "setpoint": None}))
        out = await IngestPipeline(pool).handle(f"{device.root_topic}/sync/rows/batch",
                                                f.payload(rows))
        assert out.lineage_id is not None
        review_id = await pool.fetchval(
            "SELECT id FROM edge_schema_reviews WHERE lineage_id = $1", out.lineage_id)
        return Staged(device, out.lineage_id, review_id)

    return _stage


@pytest.fixture
def stage_registry(client: httpx.AsyncClient, stage: Callable[..., Any],
                   pool: asyncpg.Pool) -> Callable[..., Any]:
    """Switch the tenant's project to coalescing (PATCH /edge/policy) and stage ``names``
    devices with the same table: one registry review waits for all of them. Returns
    (registry review id, the staged devices)."""

    async def _stage(tenant: Tenant, *names: str, mode: str = "project",
                     fleet: str | None = None, table: str = "device_state",
                     policy: dict[str, Any] | None = None
                     ) -> tuple[uuid.UUID, list[Staged]]:
        r = await client.patch(tenant.url("/edge/policy"),
                               headers=tenant.headers(**{"Idempotency-Key": str(uuid.uuid4())}),
                               json={"schema_coalescing_mode": mode, **(policy or {})})
        assert r.status_code == 200, r.text
        staged = [await stage(tenant, name=n, table=table, fleet=fleet)
                  for n in (names or ("gw-a", "gw-b"))]
        review_id = await pool.fetchval(
            "SELECT rr.id FROM edge_registry_reviews rr JOIN edge_schema_registry r "
            "ON r.id = rr.registry_id WHERE rr.project_id = $1 AND r.source_table = $2 "
            "AND rr.status IN ('queued', 'in_review')", tenant.project_id, table)
        assert review_id is not None
        return review_id, staged

    return _stage


@pytest.fixture(scope="module")
def api_url(database_url: str, pool: Any) -> Iterator[str]:
    """The API on a free port, served from a thread with its own event loop and pool
    (``pool`` is only asked for so the schema is migrated)."""
    import uvicorn

    sock = bind_socket("127.0.0.1", 0)
    server = _Uvicorn(uvicorn.Config(create_app(database_url=database_url),
                                     log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                              name="test-api")
    thread.start()
    deadline = time.monotonic() + 60  # hang guard, not a timing assertion
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the API did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(30)


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], api_url: str, tenant) -> Cli:
    return Cli(capsys, api_url, tenant)


def sample_db(path: Path) -> bytes:
    """A small SQLite database to introspect (sync policies): a keyed table, a timed
    one, one without a key and a log."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.executescript("""
            CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE readings (id INTEGER PRIMARY KEY, recorded_at DATETIME NOT NULL,
                                   temp REAL, humidity REAL, note TEXT);
            CREATE TABLE scratch (a, b);
            CREATE TABLE events_log (ts TEXT, kind TEXT, payload BLOB);
            INSERT INTO settings VALUES ('mode', 'auto'), ('unit', 'C');
            INSERT INTO readings (recorded_at, temp) VALUES ('2026-01-01T00:00:00Z', 20.5);
        """)
        db.commit()
    return path.read_bytes()
