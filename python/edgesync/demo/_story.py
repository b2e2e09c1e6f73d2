"""The demo: a device's SQLite change travels device → MQTT → worker → PostgreSQL.

Everything runs for real — the agent's triggers in a SQLite file, an MQTT broker,
the worker, PostgreSQL — only in one process, so a newcomer sees each step.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import asyncpg

from edgesync import fleet, governance
from edgesync.materialize import quote_ident
from edgesync.server import Server, ServerSettings
from edgesync.staging import list_staged_rows

__all__ = ["run_demo"]

T = TypeVar("T")
PROJECT, SLUG, DEVICE, TABLE = "demo", "demo", "demo-gw-01", "device_state"
COLUMNS = ("id", "mode", "setpoint", "label")


def say(step: str, text: str = "") -> None:
    print(f"\n== {step}" + (f"\n   {text}" if text else ""), flush=True)


def show(rows: list[tuple[Any, ...]], indent: str = "   ") -> None:
    for row in rows:
        print(indent + " | ".join("NULL" if v is None else str(v) for v in row), flush=True)


async def wait_for(what: str, probe: Callable[[], Awaitable[T | None]],
                   limit: float = 60.0) -> T:
    deadline = time.monotonic() + limit
    while True:
        value = await probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"demo: gave up waiting for {what} after {limit:.0f}s")
        await asyncio.sleep(0.2)


def _agent_yaml(workdir: Path, broker: str) -> Path:
    path = workdir / "agent.yaml"
    path.write_text(
        "name: demo-device\n"
        "connection:\n"
        "  transport: mqtt\n"
        f"  server_url: {broker}\n"
        f"  device_id: {DEVICE}\n"
        f"  root_topic: {SLUG}/{DEVICE}\n"
        "  mqtt:\n"
        "    keep_alive: 30s\n"
        "    clean_session: false\n"
        "sqlite-replication:\n"
        f"  source_db_path: {workdir / 'source.db'}\n"
        f"  state_db_path: {workdir / 'state.db'}\n"
        "  flush_interval: 1s\n"
        "  table_strategies:\n"
        f"    {TABLE}:\n"
        "      strategy: rows\n",
        encoding="utf-8")
    return path


def _sqlite_rows(db: Path) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return conn.execute(f"SELECT {', '.join(COLUMNS)} FROM {TABLE} ORDER BY id").fetchall()


def _app_write(db: Path, *statements: str) -> None:
    """The 'application': a plain sqlite3 connection that knows nothing of edgesync."""
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        for stmt in statements:
            conn.execute(stmt)


async def _cloud_rows(pool: asyncpg.Pool, table: str) -> list[tuple[Any, ...]]:
    cols = ", ".join(quote_ident(c) for c in COLUMNS)
    rows = await pool.fetch(
        f"SELECT {cols} FROM {quote_ident(table)} WHERE NOT _edge_deleted ORDER BY id")
    return [tuple(r) for r in rows]


async def run_demo(workdir: Path | None = None, database_url: str | None = None,
                   mqtt_url: str | None = None) -> bool:
    from edgesync.agent import Agent, load_config

    with contextlib.ExitStack() as files:
        if workdir is None:
            workdir = Path(files.enter_context(tempfile.TemporaryDirectory(prefix="edgesync-")))
        workdir.mkdir(parents=True, exist_ok=True)
        say("1. Cloud", "starting PostgreSQL and an MQTT broker"
            + (" (embedded defaults)" if not (database_url or mqtt_url) else ""))
        settings = ServerSettings(database_url=database_url, mqtt_url=mqtt_url,
                                  data_dir=workdir / "cloud", embedded_mqtt_port=None)
        async with Server(settings) as server, asyncio.TaskGroup() as tg:
            worker = tg.create_task(server.run(), name="edgesync.demo.worker")
            await server.wait_ready()
            assert server.pool is not None and server.broker is not None
            print(f"   worker listening on {server.broker}", flush=True)
            ok = await _story(server.pool, str(server.broker), workdir, Agent, load_config)
            worker.cancel()
        return ok
    return False  # pragma: no cover - unreachable, keeps mypy's flow analysis happy


async def _story(pool: asyncpg.Pool, broker: str, workdir: Path, agent_cls: Any,
                 load_config: Any) -> bool:
    async with pool.acquire() as conn:
        scope = await fleet.get_device(conn, SLUG, DEVICE) or await fleet.add_device(
            conn, project=PROJECT, name=DEVICE, topic_slug=SLUG)
    say("2. Registry", f"device {DEVICE} in project {PROJECT!r}: topics under {scope.root_topic}/")

    db = workdir / "source.db"
    db.unlink(missing_ok=True)
    (workdir / "state.db").unlink(missing_ok=True)
    _app_write(db, f"CREATE TABLE {TABLE} (id INTEGER PRIMARY KEY, mode TEXT NOT NULL, "
                   "setpoint REAL, label TEXT)")
    say("3. Device", f"application database {db} with table {TABLE}")

    async with agent_cls(load_config(_agent_yaml(workdir, broker))) as agent:
        tg_task = asyncio.create_task(agent.run(), name="edgesync.demo.agent")
        try:
            say("4. Agent", "triggers installed; the application writes five rows")
            _app_write(db, *(f"INSERT INTO {TABLE} VALUES ({i}, 'heating', {18 + i}.5, "
                             f"'room {i}')" for i in range(1, 6)))
            sent = await agent.flush()
            print(f"   published {sent} journaled change(s) on {scope.root_topic}/sync/rows/batch")

            review = await wait_for("the schema review", lambda: _queued_review(pool, scope))
            lineage = await pool.fetchrow(
                "SELECT * FROM edge_table_lineages WHERE id = $1", review.lineage_id)
            assert lineage is not None
            say("5. Governance", f"first schema of {TABLE} classified {review.classification}:"
                f" lineage {lineage['status']} ({lineage['pause_reason']}), review "
                f"{review.id} {review.status}")
            await wait_for("staged rows", lambda: _staged_count(pool, review.lineage_id, 5))
            async with pool.acquire() as conn:
                staged = await list_staged_rows(conn, review.lineage_id)
            print(f"   {len(staged)} row(s) held in edge_staged_rows (zstd blobs):")
            show([(r.doc["commit_seq"], r.doc["op"], r.doc["row"]) for r in staged], "     ")

            from edgesync.operations import approve_review

            async with pool.acquire() as conn:
                approved = await approve_review(conn, review.id, actor="demo-operator",
                                                action_version=None, column_actions=None)
            say("6. Review", f"operator approved it ({approved.status}); mirroring every column")
            table = await wait_for("replay", lambda: _replayed(pool, review.lineage_id))
            print(f"   replayed into {table}:")
            show(await _cloud_rows(pool, table), "     ")

            say("7. Live changes", "update two rows, delete one, insert one, change a PK")
            _app_write(db,
                       f"UPDATE {TABLE} SET mode = 'cooling', setpoint = 21 WHERE id IN (2, 3)",
                       f"DELETE FROM {TABLE} WHERE id = 4",
                       f"INSERT INTO {TABLE} VALUES (6, 'off', NULL, 'naïve ☃ \"quoted\"')",
                       f"UPDATE {TABLE} SET id = 50 WHERE id = 5")
            sent = await agent.flush()
            print(f"   published {sent} change(s); they materialize directly (lineage active)")
            expected = _sqlite_rows(db)
            with contextlib.suppress(TimeoutError):
                await wait_for("the cloud to catch up",
                               lambda: _matches(pool, table, expected), limit=30)
        finally:
            tg_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await tg_task

    cloud = await _cloud_rows(pool, table)
    say("8. Compare", f"SQLite {TABLE} vs PostgreSQL {table}")
    print("   sqlite:", flush=True)
    show(expected, "     ")
    print("   cloud:", flush=True)
    show(cloud, "     ")
    same = cloud == expected
    print(f"\n{'OK' if same else 'MISMATCH'}: {len(cloud)} cloud row(s) "
          f"{'equal' if same else 'differ from'} {len(expected)} SQLite row(s)", flush=True)
    return same


async def _queued_review(pool: asyncpg.Pool, scope: fleet.DeviceScope
                         ) -> governance.Review | None:
    async with pool.acquire() as conn:
        reviews = await governance.list_reviews(conn, project_id=scope.project_id,
                                                status="queued")
    mine = [r for r in reviews if r.device_id == scope.device_id and r.source_table == TABLE]
    return mine[-1] if mine else None


async def _staged_count(pool: asyncpg.Pool, lineage_id: Any, want: int) -> bool:
    n = await pool.fetchval("SELECT staged_rows FROM edge_table_lineages WHERE id = $1",
                            lineage_id)
    return bool(n is not None and n >= want)


async def _replayed(pool: asyncpg.Pool, lineage_id: Any) -> str | None:
    row = await pool.fetchrow(
        "SELECT status, staged_rows, target_table FROM edge_table_lineages WHERE id = $1",
        lineage_id)
    pending = await pool.fetchval(
        "SELECT count(*) FROM edge_replay_intents WHERE lineage_id = $1 "
        f"AND status = '{governance.ReplayStatus.PENDING}'", lineage_id)
    if (row and row["status"] == governance.LineageStatus.ACTIVE and row["staged_rows"] == 0
            and pending == 0):
        return str(row["target_table"])
    return None


async def _matches(pool: asyncpg.Pool, table: str, expected: list[tuple[Any, ...]]) -> bool:
    return await _cloud_rows(pool, table) == expected
