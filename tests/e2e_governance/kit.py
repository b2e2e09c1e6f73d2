"""Helpers of the governance end-to-end tests: the cloud worker in-process, a device
(registry entry, SQLite application database, agent configuration), reviews, and
row-for-row comparison of the cloud with SQLite."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiomqtt
import asyncpg
import orjson

from edgesync import governance, registry
from edgesync.materialize import quote_ident
from edgesync.protocol import mqtt_client, parse_broker_url
from edgesync.server import Server, ServerSettings

Row = tuple[Any, ...]


async def eventually(probe: Callable[[], Awaitable[Any]], limit: float = 30.0,
                     what: str = "condition") -> Any:
    """Poll ``probe`` until it returns something truthy (bounded, never a fixed sleep)."""
    deadline = time.monotonic() + limit
    while True:
        value = await probe()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not reached within {limit:.0f}s"
        await asyncio.sleep(0.1)


# ------------------------------------------------------------------ the device side

def app(db: Path, *sql: str | tuple[str, Iterable[Any]]) -> None:
    """The application: plain sqlite3, one transaction for all statements given.
    A tuple is ``(statement, rows)`` for ``executemany``."""
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        for stmt in sql:
            if isinstance(stmt, tuple):
                conn.executemany(stmt[0], stmt[1])
            else:
                conn.execute(stmt)


def sqlite_rows(db: Path, sql: str) -> list[Row]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return [tuple(r) for r in conn.execute(sql).fetchall()]


def utc(text: str) -> datetime:
    """A SQLite ISO 8601 timestamp (no offset means UTC) as an aware datetime."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@dataclass
class Device:
    scope: registry.DeviceScope
    db: Path
    config: Path

    @property
    def id(self) -> uuid.UUID:
        return self.scope.device_id


async def register(pool: asyncpg.Pool, tmp_path: Path, mqtt_url: str, unique: str, *,
                   tag: str = "d", policy: dict[str, Any] | None = None,
                   telemetry: dict[str, str] | None = None) -> Device:
    """A registered device (own project, so policy is per test), an empty application
    database and the agent's YAML. ``telemetry`` maps table → ts_column."""
    async with pool.acquire() as conn:
        scope = await registry.add_device(conn, project=f"gov-{tag}-{unique}",
                                          name=f"dev-{tag}-{unique}",
                                          topic_slug=f"gov-{tag}-{unique}")
        if policy:
            # Before the device's first message: the worker caches scopes (and policy).
            await conn.execute("UPDATE edge_projects SET policy = $2 WHERE id = $1",
                               scope.project_id, policy)
            fresh = await registry.get_device(conn, scope.topic_slug, scope.device_name)
            assert fresh is not None
            scope = fresh
    home = tmp_path / tag
    home.mkdir()
    db = home / "app.db"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
    strategies = "".join(
        f"    {table}:\n      strategy: telemetry\n      ts_column: {ts}\n"
        for table, ts in (telemetry or {}).items())
    config = home / "agent.yaml"
    config.write_text(
        "connection:\n  transport: mqtt\n"
        f"  server_url: {mqtt_url}\n  device_id: {scope.device_name}\n"
        f"  root_topic: {scope.root_topic}\n"
        "sqlite-replication:\n"
        f"  source_db_path: {db}\n  state_db_path: {home / 'state.db'}\n"
        "  flush_interval: 200ms\n"
        + ("  table_strategies:\n" + strategies if strategies else ""))
    return Device(scope, db, config)


# ------------------------------------------------------------------ the cloud side

@contextlib.asynccontextmanager
async def cloud(database_url: str, mqtt_url: str, data_dir: Path, unique: str
                ) -> AsyncIterator[Server]:
    """``edgesync serve`` in-process (ingest, replay, controls) until the block ends."""
    settings = ServerSettings(database_url=database_url, mqtt_url=mqtt_url,
                              data_dir=data_dir, client_id=f"worker-{unique}")
    async with Server(settings) as server:
        task = asyncio.create_task(server.run(), name="test.worker")
        try:
            await server.wait_ready()
            yield server
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


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


async def reviews(pool: asyncpg.Pool, device: Device, *, status: str | None = None
                  ) -> dict[str, dict[str, Any]]:
    """Reviews of the device by source table (the newest when several)."""
    async with pool.acquire() as conn:
        found = await governance.list_reviews(conn, project_id=device.scope.project_id,
                                              status=status)
    return {r["source_table"]: r for r in found if r["device_id"] == device.id}


async def wait_reviews(pool: asyncpg.Pool, device: Device, tables: set[str],
                       status: str = "queued") -> dict[str, dict[str, Any]]:
    async def probe() -> dict[str, dict[str, Any]] | None:
        found = await reviews(pool, device, status=status)
        return found if tables <= set(found) else None

    found: dict[str, dict[str, Any]] = await eventually(probe, what=f"{status} reviews {tables}")
    return found


async def claim_and_approve(pool: asyncpg.Pool, review: dict[str, Any],
                            actions: list[dict[str, Any]] | None) -> dict[str, Any]:
    async with pool.acquire() as conn:
        claimed = await governance.claim_review(conn, review["id"], actor="op",
                                                action_version=review["action_version"])
        return await governance.approve_review(conn, review["id"], actor="op",
                                               action_version=claimed["action_version"],
                                               column_actions=actions)


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


async def target_of(pool: asyncpg.Pool, device: Device, table: str) -> str:
    rec = await lineage(pool, device, table)
    assert rec is not None and rec["target_table"], f"{table} has no target yet"
    return str(rec["target_table"])


async def state_rows(pool: asyncpg.Pool, table: str, device: Device, columns: list[str],
                     order: str) -> list[Row]:
    """Live (not deleted) rows of an ``edge_state_*`` target."""
    cols = ", ".join(quote_ident(c) for c in columns)
    rows = await pool.fetch(f"SELECT {cols} FROM {quote_ident(table)} WHERE device_id = $1 "
                            f"AND NOT _edge_deleted ORDER BY {quote_ident(order)}", device.id)
    return [tuple(r) for r in rows]


async def ts_rows(pool: asyncpg.Pool, table: str, device: Device, columns: list[str]
                  ) -> list[Row]:
    """Rows of an ``edge_ts_*`` target for one device: ``(event_ts, *columns)``."""
    cols = "".join(f", {quote_ident(c)}" for c in columns)
    rows = await pool.fetch(f"SELECT event_ts{cols} FROM {quote_ident(table)} "
                            "WHERE device_id = $1 ORDER BY event_ts, row_id", device.id)
    return [tuple(r) for r in rows]


async def wait_equal(fetch: Callable[[], Awaitable[list[Row]]], expected: list[Row],
                     what: str, limit: float = 30.0) -> None:
    """Wait until the cloud shows ``expected``; on timeout, show the difference."""
    last: list[Row] = []

    async def probe() -> bool:
        nonlocal last
        last = await fetch()
        return last == expected

    try:
        await eventually(probe, limit, what)
    except AssertionError:
        missing = [r for r in expected if r not in last][:5]
        extra = [r for r in last if r not in expected][:5]
        raise AssertionError(f"{what}: cloud has {len(last)} rows, SQLite {len(expected)}; "
                             f"missing e.g. {missing}; unexpected e.g. {extra}") from None


# ------------------------------------------------------------------ the wire

class Capture:
    """Every message the device publishes under ``{root}/sync/#``, in arrival order."""

    def __init__(self, mqtt_url: str, root: str, unique: str) -> None:
        self._client = mqtt_client(parse_broker_url(mqtt_url), identifier=f"capture-{unique}",
                                   clean_session=True)
        self._root = root
        self.messages: list[tuple[str, bytes]] = []
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Capture:
        await self._client.__aenter__()
        await self._client.subscribe(f"{self._root}/sync/#", qos=1)
        self._task = asyncio.create_task(self._collect(), name="test.capture")
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

    def batches(self, kind: str) -> list[tuple[str, bytes]]:
        """Captured ``sync/{kind}/batch`` messages, one per batch_id (the agent may
        send a batch again under the same id; the first copy is kept)."""
        seen: set[str] = set()
        out = []
        for topic, payload in self.messages:
            if topic.endswith(f"/sync/{kind}/batch"):
                batch_id = orjson.loads(payload)["batch_id"]
                if batch_id not in seen:
                    seen.add(batch_id)
                    out.append((topic, payload))
        return out
