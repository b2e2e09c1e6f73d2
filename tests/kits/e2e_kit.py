"""Helpers of the end-to-end tests (tests/e2e, tests/e2e_governance): the real server
in-process, devices registered in the real registry with a SQLite file written by a
plain ``sqlite3`` application and the real agent, reviews, the wire between them, and
row-for-row comparison of the cloud with SQLite.

It lives in tests/ (not in either test directory) so both import it by plain name:
pytest puts tests/ on ``sys.path`` for tests/conftest.py, whatever part of the suite
runs. Every wait is a bounded poll (``eventually``); no assertion depends on timing.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiomqtt
import asyncpg
import orjson

import edgesync.fleet
from edgesync import governance
from edgesync.agent import Agent, load_config
from edgesync.control import BackpressureSweeper, ControlSender
from edgesync.materialize import quote_ident
from edgesync.protocol import mqtt_client, parse_broker_url
from edgesync.server import Server, ServerSettings
from kits.review_helpers import claim_and_approve

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


def sqlite_rows(db: Path, sql: str) -> list[Row]:
    with contextlib.closing(sqlite3.connect(db, timeout=10)) as conn:
        return [tuple(r) for r in conn.execute(sql).fetchall()]


def sqlite_table(db: Path, table: str, columns: list[str]) -> list[Row]:
    """``columns`` of every row of ``table``, ordered by the first column."""
    return sqlite_rows(db, f"SELECT {', '.join(columns)} FROM {table} ORDER BY {columns[0]}")


def utc(text: str) -> datetime:
    """A SQLite ISO 8601 timestamp (no offset means UTC) as an aware datetime."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


# ------------------------------------------------------------------ a device

@dataclass
class Device:
    scope: edgesync.fleet.DeviceScope
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
                   telemetry: dict[str, str] | None = None,
                   signed_token: str | None = None, token_env: str | None = None,
                   fleet: str | None = None, **replication: str | int | bool) -> Device:
    """A registered device in its own project (policy per test), an empty application
    database (WAL) and the agent's YAML. ``telemetry`` maps table → ts_column;
    ``replication`` adds keys of the ``sqlite-replication`` section
    (``confirm_timeout="2s"``, ...). ``fleet`` puts it in that fleet (made when new).
    With ``signed_token`` the device record requires signed controls and the agent
    verifies them, reading the token from the environment variable ``token_env`` (the
    caller sets it)."""
    async with pool.acquire() as conn:
        scope = await edgesync.fleet.add_device(conn, project=f"e2e-{tag}-{unique}",
                                                name=f"dev-{tag}-{unique}",
                                                topic_slug=f"e2e-{tag}-{unique}", fleet=fleet)
        # Before the device's first message: the worker caches scopes (and policy).
        if policy:
            await conn.execute("UPDATE edge_projects SET policy = $2 WHERE id = $1",
                               scope.project_id, policy)
        if signed_token is not None:
            await conn.execute("UPDATE edge_devices SET signed_control = true, "
                               "control_token = $2 WHERE id = $1", scope.device_id,
                               signed_token)
        fresh = await edgesync.fleet.get_device(conn, scope.topic_slug, scope.device_name)
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
    strategies = "".join(
        f"    {table}:\n      strategy: telemetry\n      ts_column: {ts}\n"
        for table, ts in (telemetry or {}).items())
    config = home / "agent.yaml"
    config.write_text(
        "connection:\n  transport: mqtt\n"
        f"  server_url: {mqtt_url}\n  device_id: {scope.device_name}\n"
        f"  root_topic: {scope.root_topic}\n"
        + security +
        "sqlite-replication:\n"
        f"  source_db_path: {db}\n  state_db_path: {home / 'state.db'}\n"
        + "".join(f"  {k}: {_yaml(v)}\n" for k, v in options.items())
        + ("  table_strategies:\n" + strategies if strategies else ""))
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
                resend_after: timedelta | None = None, api_port: int = 0
                ) -> AsyncIterator[Server]:
    """``edgesync serve`` in-process with its HTTP API on a free port (presigned uploads),
    running until the block ends (``api_port``: a fixed one, so presigned upload URLs
    granted before a restart stay good after it). The outbox sender and the sweep poll
    faster than in production; ``resend_after`` shortens the outbox's re-send timeout."""
    settings = ServerSettings(database_url=database_url, mqtt_url=mqtt_url,
                              data_dir=data_dir, client_id=f"worker-{unique}",
                              api_port=api_port)
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


async def target_of(pool: asyncpg.Pool, device: Device, table: str) -> str:
    rec = await wait_lineage(pool, device, table, lambda r: r["target_table"] is not None,
                             "target provisioned")
    return str(rec["target_table"])


# ------------------------------------------------------------------ reviews

async def reviews(pool: asyncpg.Pool, device: Device, *, status: str | None = None
                  ) -> dict[str, governance.Review]:
    """Reviews of the device by source table (the newest when several)."""
    async with pool.acquire() as conn:
        found = await governance.list_reviews(conn, project_id=device.scope.project_id,
                                              status=status)
    return {r.source_table: r for r in found if r.device_id == device.id}


async def wait_reviews(pool: asyncpg.Pool, device: Device, tables: set[str],
                       status: str = "queued", limit: float = 30.0
                       ) -> dict[str, governance.Review]:
    async def probe() -> dict[str, governance.Review] | None:
        found = await reviews(pool, device, status=status)
        return found if tables <= set(found) else None

    found: dict[str, governance.Review] = await eventually(probe, limit,
                                                        f"{status} reviews {tables}")
    return found


async def approve(pool: asyncpg.Pool, device: Device, table: str, *,
                  sync_authority: str | None = None, limit: float = 30.0) -> None:
    """Wait for the table's queued review, claim it and approve every column."""
    queued = await wait_reviews(pool, device, {table}, limit=limit)
    await claim_and_approve(pool, queued[table], None, sync_authority=sync_authority)


def actions(**by_column: str | tuple[str, str]) -> list[dict[str, Any]]:
    """``actions(id="mirror", kind=("mirror", "event_kind"), note="ignore")``."""
    out = []
    for name, spec in by_column.items():
        if isinstance(spec, tuple):
            out.append({"source_column_name": name, "action": spec[0],
                        "mirror_column_name": spec[1]})
        else:
            out.append({"source_column_name": name, "action": spec})
    return out


# ------------------------------------------------------------------ the cloud's rows

async def state_rows(pool: asyncpg.Pool, target: str, device: Device, columns: list[str],
                     order: str | None = None) -> list[Row]:
    """Live (not tombstoned) rows of an ``edge_state_*`` target for one device, ordered
    by ``order`` (default: the first column)."""
    cols = ", ".join(quote_ident(c) for c in columns)
    rows = await pool.fetch(f"SELECT {cols} FROM {quote_ident(target)} WHERE device_id = $1 "
                            f"AND NOT _edge_deleted ORDER BY {quote_ident(order or columns[0])}",
                            device.id)
    return [tuple(r) for r in rows]


async def ts_rows(pool: asyncpg.Pool, target: str, device: Device, columns: list[str]
                  ) -> list[Row]:
    """Rows of an ``edge_ts_*`` target for one device: ``(event_ts, *columns)``."""
    cols = "".join(f", {quote_ident(c)}" for c in columns)
    rows = await pool.fetch(f"SELECT event_ts{cols} FROM {quote_ident(target)} "
                            "WHERE device_id = $1 ORDER BY event_ts, row_id", device.id)
    return [tuple(r) for r in rows]


async def wait_rows(fetch: Callable[[], Awaitable[list[Row]]],
                    expected: list[Row] | Callable[[], list[Row]], what: str,
                    limit: float = 30.0) -> list[Row]:
    """Nothing lost, nothing doubled: wait until the cloud (``fetch``) shows ``expected``
    (a callable is read again at every poll, for a SQLite still changing); on timeout
    show the difference."""
    last: list[Row] = []
    want: list[Row] = []

    async def probe() -> bool:
        nonlocal last, want
        want = expected() if callable(expected) else expected
        last = await fetch()
        return last == want

    try:
        await eventually(probe, limit, what)
    except AssertionError:
        missing = [r for r in want if r not in last][:5]
        extra = [r for r in last if r not in want][:5]
        raise AssertionError(f"{what}: cloud has {len(last)} rows, SQLite {len(want)}; "
                             f"missing e.g. {missing}; unexpected e.g. {extra}") from None
    return want


async def wait_equal(pool: asyncpg.Pool, device: Device, table: str, columns: list[str],
                     limit: float = 40.0) -> list[Row]:
    """Wait until the cloud's live rows of a state table equal SQLite's (all of them
    mirrored under their own names) row for row."""
    target = await target_of(pool, device, table)
    return await wait_rows(lambda: state_rows(pool, target, device, columns),
                           lambda: sqlite_table(device.db, table, columns),
                           f"{table}: cloud equals SQLite", limit)


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
        """Row batches of ``table`` as sent, a batch sent again included again."""
        return [d for d in self.docs("/sync/rows/batch") if d.get("source_table") == table]

    def distinct_batches(self, kind: str) -> list[tuple[str, bytes]]:
        """``sync/{kind}/batch`` messages, one per batch_id (the agent may send a batch
        again under the same id; the first copy is kept)."""
        seen: set[str] = set()
        out = []
        for topic, payload in self.messages:
            if topic.endswith(f"/sync/{kind}/batch"):
                batch_id = orjson.loads(payload)["batch_id"]
                if batch_id not in seen:
                    seen.add(batch_id)
                    out.append((topic, payload))
        return out

    async def publish_control(self, doc: dict[str, Any]) -> None:
        await self._client.publish(f"{self.root}/sync/ingest/control", orjson.dumps(doc),
                                   qos=1)
