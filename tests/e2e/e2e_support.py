"""Helpers of the control-channel end-to-end tests (tests/e2e): the real server in-process
(ingest, replay, outbox sender, progress reporter, backpressure sweep, HTTP API), devices
registered in the real registry, the real agent against a SQLite file written by a plain
``sqlite3`` application, and row-for-row comparison of cloud and SQLite.

Every wait is a bounded poll (``eventually``); no assertion depends on timing.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiomqtt
import asyncpg
import orjson

from edgesync import governance, registry
from edgesync.agent import Agent, load_config
from edgesync.control import BackpressureSweeper, ControlSender
from edgesync.materialize import quote_ident
from edgesync.protocol import mqtt_client, parse_broker_url
from edgesync.server import Server, ServerSettings

Row = tuple[Any, ...]


async def eventually(probe: Callable[[], Awaitable[Any]], limit: float = 30.0,
                     what: str = "condition") -> Any:
    """Poll ``probe`` until it returns something truthy; fail after ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while True:
        value = await probe()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not reached within {limit:.0f}s"
        await asyncio.sleep(0.1)


# ------------------------------------------------------------------ the application

def app(db: Path, *sql: str | tuple[str, Iterable[Any]]) -> None:
    """The application: plain sqlite3, one transaction for all statements given.
    A tuple is ``(statement, rows)`` for ``executemany``."""
    with contextlib.closing(sqlite3.connect(db, timeout=10)) as conn, conn:
        for stmt in sql:
            if isinstance(stmt, tuple):
                conn.executemany(stmt[0], stmt[1])
            else:
                conn.execute(stmt)


def sqlite_rows(db: Path, table: str, columns: list[str]) -> list[Row]:
    cols = ", ".join(columns)
    with contextlib.closing(sqlite3.connect(db, timeout=10)) as conn:
        return [tuple(r) for r in conn.execute(
            f"SELECT {cols} FROM {table} ORDER BY {columns[0]}").fetchall()]


def journal_count(db: Path, table: str | None = None) -> int:
    with contextlib.closing(sqlite3.connect(db, timeout=10)) as conn:
        if table is None:
            n = conn.execute("SELECT count(*) FROM __edgesync_journal").fetchone()[0]
        else:
            n = conn.execute("SELECT count(*) FROM __edgesync_journal WHERE table_name = ?",
                             (table,)).fetchone()[0]
    return int(n)


def agent_table_state(state_db: Path, table: str) -> dict[str, Any] | None:
    """The agent's own record of a table in state.db (paused, watermark, cursor)."""
    if not state_db.exists():
        return None
    with contextlib.closing(sqlite3.connect(state_db, timeout=10)) as conn:
        conn.row_factory = sqlite3.Row
        row = conn.execute("SELECT * FROM tables WHERE source_table = ?", (table,)).fetchone()
    return dict(row) if row is not None else None


def agent_meta_int(state_db: Path, key: str) -> int:
    with contextlib.closing(sqlite3.connect(state_db, timeout=10)) as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return int(row[0]) if row is not None else 0


def agent_knows_control(state_db: Path, control_id: str) -> bool:
    with contextlib.closing(sqlite3.connect(state_db, timeout=10)) as conn:
        return conn.execute("SELECT 1 FROM controls WHERE control_id = ?",
                            (control_id,)).fetchone() is not None


# ------------------------------------------------------------------ a device

@dataclass
class Device:
    scope: registry.DeviceScope
    home: Path
    db: Path
    config: Path
    state_db: Path
    agent_options: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> uuid.UUID:
        return self.scope.device_id

    @property
    def root(self) -> str:
        return self.scope.root_topic


async def register(pool: asyncpg.Pool, tmp_path: Path, mqtt_url: str, unique: str, *,
                   tag: str = "d", policy: dict[str, Any] | None = None,
                   signed_token: str | None = None, token_env: str | None = None,
                   **replication: str | int | bool) -> Device:
    """A registered device in its own project (policy per test), an empty application
    database (WAL) and the agent's YAML. ``replication`` adds keys of the
    ``sqlite-replication`` section (``confirm_timeout="2s"``, ...). With ``signed_token``
    the device record requires signed controls and the agent verifies them, reading the
    token from the environment variable ``token_env`` (the caller sets it)."""
    async with pool.acquire() as conn:
        scope = await registry.add_device(conn, project=f"e2e-{tag}-{unique}",
                                          name=f"dev-{tag}-{unique}",
                                          topic_slug=f"e2e-{tag}-{unique}")
        if policy:
            await conn.execute("UPDATE edge_projects SET policy = $2 WHERE id = $1",
                               scope.project_id, policy)
        if signed_token is not None:
            await conn.execute("UPDATE edge_devices SET signed_control = true, "
                               "control_token = $2 WHERE id = $1", scope.device_id,
                               signed_token)
        fresh = await registry.get_device(conn, scope.topic_slug, scope.device_name)
        assert fresh is not None
        scope = fresh
    home = tmp_path / tag
    home.mkdir()
    db = home / "app.db"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
    options = {"flush_interval": "200ms", **replication}
    security = ""
    if signed_token is not None:
        assert token_env is not None
        security = (f"security:\n  auth_token_env: {token_env}\n"
                    "  signed_control:\n    enabled: true\n")
    config = home / "agent.yaml"
    config.write_text(
        "connection:\n  transport: mqtt\n"
        f"  server_url: {mqtt_url}\n  device_id: {scope.device_name}\n"
        f"  root_topic: {scope.root_topic}\n"
        + security +
        "sqlite-replication:\n"
        f"  source_db_path: {db}\n  state_db_path: {home / 'state.db'}\n"
        + "".join(f"  {k}: {_yaml(v)}\n" for k, v in options.items()))
    return Device(scope, home, db, config, home / "state.db", options)


def _yaml(value: str | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@contextlib.asynccontextmanager
async def running_agent(device: Device) -> AsyncIterator[Agent]:
    """The real agent for ``device``, flushing every ``flush_interval`` until the block
    ends (then stopped, like a device switched off)."""
    async with Agent(load_config(device.config)) as agent:
        runner = asyncio.create_task(agent.run(), name=f"test.agent.{device.scope.device_name}")
        try:
            await asyncio.wait_for(agent.wait_connected(), 30)
            yield agent
        finally:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner


# ------------------------------------------------------------------ the cloud

@contextlib.asynccontextmanager
async def cloud(database_url: str, mqtt_url: str, data_dir: Path, unique: str, *,
                resend_after: timedelta | None = None) -> AsyncIterator[Server]:
    """``edgesync serve`` in-process with its HTTP API on a free port (presigned uploads),
    running until the block ends. The outbox sender and the sweep poll faster than in
    production; ``resend_after`` shortens the outbox's re-send timeout."""
    settings = ServerSettings(database_url=database_url, mqtt_url=mqtt_url,
                              data_dir=data_dir, client_id=f"worker-{unique}", api_port=0)
    async with Server(settings) as server:
        assert server.pool is not None and server.publisher is not None
        server.controls = ControlSender(server.pool, server.publisher, poll_interval=0.5,
                                        **({"resend_after": resend_after}
                                           if resend_after is not None else {}))
        server.sweeper = BackpressureSweeper(server.pool, interval=0.5)
        task = asyncio.create_task(server.run(), name="test.worker")
        try:
            await server.wait_ready()
            yield server
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def pool_of(server: Server) -> asyncpg.Pool:
    assert server.pool is not None
    return server.pool


async def lineage(pool: asyncpg.Pool, device: Device, table: str) -> asyncpg.Record | None:
    return await pool.fetchrow(
        "SELECT * FROM edge_table_lineages WHERE device_id = $1 AND source_table = $2",
        device.id, table)


async def wait_lineage(pool: asyncpg.Pool, device: Device, table: str,
                       check: Callable[[asyncpg.Record], bool], what: str,
                       limit: float = 30.0) -> asyncpg.Record:
    async def probe() -> asyncpg.Record | None:
        rec = await lineage(pool, device, table)
        return rec if rec is not None and check(rec) else None

    rec: asyncpg.Record = await eventually(probe, limit, f"{table}: {what}")
    return rec


async def approve(pool: asyncpg.Pool, device: Device, table: str, *,
                  sync_authority: str | None = None, limit: float = 30.0) -> None:
    """Wait for the table's queued review, claim it and approve every column."""
    async def queued() -> dict[str, Any] | None:
        async with pool.acquire() as conn:
            found = [r for r in await governance.list_reviews(conn, status="queued")
                     if r["device_id"] == device.id and r["source_table"] == table]
        return found[0] if found else None

    review = await eventually(queued, limit, f"queued review of {table}")
    extra = {"sync_authority": sync_authority} if sync_authority else {}
    async with pool.acquire() as conn:
        claimed = await governance.claim_review(conn, review["id"], actor="op",
                                                action_version=review["action_version"])
        await governance.approve_review(conn, review["id"], actor="op",
                                        action_version=claimed["action_version"],
                                        column_actions=None, **extra)


async def target_of(pool: asyncpg.Pool, device: Device, table: str) -> str:
    rec = await wait_lineage(pool, device, table, lambda r: r["target_table"] is not None,
                             "target provisioned")
    return str(rec["target_table"])


async def cloud_rows(pool: asyncpg.Pool, target: str, device: Device,
                     columns: list[str]) -> list[Row]:
    """Live (not tombstoned) rows of an ``edge_state_*`` target for one device."""
    cols = ", ".join(quote_ident(c) for c in columns)
    rows = await pool.fetch(f"SELECT {cols} FROM {quote_ident(target)} WHERE device_id = $1 "
                            f"AND NOT _edge_deleted ORDER BY {quote_ident(columns[0])}",
                            device.id)
    return [tuple(r) for r in rows]


async def wait_equal(pool: asyncpg.Pool, device: Device, table: str, columns: list[str],
                     limit: float = 40.0) -> list[Row]:
    """Nothing lost, nothing doubled: wait until the cloud's live rows of ``table`` equal
    SQLite's row for row; on timeout show the difference."""
    target = await target_of(pool, device, table)
    last: list[Row] = []
    expected: list[Row] = []

    async def probe() -> bool:
        nonlocal last, expected
        expected = sqlite_rows(device.db, table, columns)
        last = await cloud_rows(pool, target, device, columns)
        return last == expected

    try:
        await eventually(probe, limit, f"{table}: cloud equals SQLite")
    except AssertionError:
        missing = [r for r in expected if r not in last][:5]
        extra = [r for r in last if r not in expected][:5]
        raise AssertionError(f"{table}: cloud has {len(last)} rows, SQLite {len(expected)}; "
                             f"missing e.g. {missing}; unexpected e.g. {extra}") from None
    return expected


async def pending_controls(pool: asyncpg.Pool, device: Device, kind: str
                           ) -> list[asyncpg.Record]:
    return list(await pool.fetch(
        "SELECT id, status, body, attempts FROM edge_pending_controls WHERE device_id = $1 "
        "AND control_kind = $2 ORDER BY created_at", device.id, kind))


# ------------------------------------------------------------------ the wire

class Wire:
    """Every message under ``{root}/sync/#`` (both directions), in arrival order."""

    def __init__(self, mqtt_url: str, root: str, unique: str) -> None:
        self._client = mqtt_client(parse_broker_url(mqtt_url),
                                   identifier=f"wire-{unique}-{uuid.uuid4().hex[:6]}",
                                   clean_session=True)
        self.root = root
        self.messages: list[tuple[str, bytes]] = []
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Wire:
        await self._client.__aenter__()
        await self._client.subscribe(f"{self.root}/sync/#", qos=1)
        self._task = asyncio.create_task(self._collect(), name="test.wire")
        return self

    async def _collect(self) -> None:
        async for msg in self._client.messages:
            assert isinstance(msg.payload, bytes)
            self.messages.append((str(msg.topic), msg.payload))

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, aiomqtt.MqttError):
            await self._task
        with contextlib.suppress(aiomqtt.MqttError):
            await self._client.__aexit__(None, None, None)

    def docs(self, suffix: str) -> list[dict[str, Any]]:
        return [orjson.loads(p) for t, p in self.messages if t.endswith(suffix)]

    def controls(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [d for d in self.docs("/sync/ingest/control")
                if kind is None or d.get("control_kind") == kind]

    def acked(self, control_id: str) -> bool:
        return any(d.get("control_id") == control_id for d in self.docs("/sync/ingest/ack"))

    def batches(self, table: str) -> list[dict[str, Any]]:
        return [d for d in self.docs("/sync/rows/batch") if d.get("source_table") == table]

    async def publish_control(self, doc: dict[str, Any]) -> None:
        await self._client.publish(f"{self.root}/sync/ingest/control", orjson.dumps(doc),
                                   qos=1)


async def control_status(pool: asyncpg.Pool, control_id: uuid.UUID, status: str) -> bool:
    return bool(await pool.fetchval(
        "SELECT status = $2 FROM edge_pending_controls WHERE id = $1", control_id, status))


async def device_paused(state_db: Path, table: str) -> bool:
    st = agent_table_state(state_db, table)
    return st is not None and bool(st["paused"])


async def device_resumed(state_db: Path, table: str) -> bool:
    st = agent_table_state(state_db, table)
    return st is not None and not st["paused"]


async def journal_drained(db: Path) -> bool:
    """Every journaled change was confirmed (the journal's top row always stays)."""
    return journal_count(db) <= 1
