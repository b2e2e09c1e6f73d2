"""The walking skeleton end to end through real Mosquitto and PostgreSQL: triggers →
journal → MQTT → worker → staging under review → approval → replay → live changes."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from edgesync import fleet, governance
from edgesync.agent import Agent, load_config
from edgesync.materialize import quote_ident
from edgesync.server import Server, ServerSettings

pytestmark = pytest.mark.e2e


async def eventually(probe: Any, limit: float = 30.0) -> Any:
    deadline = time.monotonic() + limit
    while True:
        value = await probe()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.1)


def app(db: Path, *sql: str) -> None:
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        for stmt in sql:
            conn.execute(stmt)


def sqlite_rows(db: Path) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT id, name, score, photo FROM players ORDER BY id").fetchall()


async def cloud_rows(pool: asyncpg.Pool, table: str) -> list[tuple[Any, ...]]:
    rows = await pool.fetch(f"SELECT id, name, score, photo FROM {quote_ident(table)} "
                            "WHERE NOT _edge_deleted ORDER BY id")
    return [tuple(r) for r in rows]


async def test_skeleton_through_mosquitto_and_postgres(tmp_path: Path, database_url: str,
                                                       mqtt_url: str, unique: str) -> None:
    settings = ServerSettings(database_url=database_url, mqtt_url=mqtt_url,
                              data_dir=tmp_path / "cloud", client_id=f"worker-{unique}")
    async with Server(settings) as server, asyncio.TaskGroup() as tg:
        worker = tg.create_task(server.run(), name="test.worker")
        await server.wait_ready()
        pool = server.pool
        assert pool is not None
        async with pool.acquire() as conn:
            scope = await fleet.add_device(conn, project=f"e2e-{unique}",
                                           name=f"dev-{unique}", topic_slug=f"e2e-{unique}")
        db = tmp_path / "source.db"
        app(db, "CREATE TABLE players (id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                "score REAL, photo BLOB)")
        (tmp_path / "agent.yaml").write_text(
            "connection:\n  transport: mqtt\n"
            f"  server_url: {mqtt_url}\n  device_id: {scope.device_name}\n"
            f"  root_topic: {scope.root_topic}\n"
            "sqlite-replication:\n"
            f"  source_db_path: {db}\n  state_db_path: {tmp_path / 'state.db'}\n"
            "  flush_interval: 200ms\n")
        async with Agent(load_config(tmp_path / "agent.yaml")) as agent:
            runner = asyncio.create_task(agent.run(), name="test.agent")
            app(db, *(f"INSERT INTO players VALUES ({i}, 'p{i}', {i * 1.5}, NULL)"
                      for i in range(1, 201)),
                "INSERT INTO players VALUES (500, 'Zoë \"the\" ☃', NULL, x'00ff10')")
            await agent.flush()

            async def queued() -> Any:
                async with pool.acquire() as conn:
                    rs = [r for r in await governance.list_reviews(conn, status="queued")
                          if r.device_id == scope.device_id]
                    return rs[0] if rs else None

            review = await eventually(queued)
            lineage_id = review.lineage_id
            await eventually(lambda: pool.fetchval(
                "SELECT staged_rows = 201 FROM edge_table_lineages WHERE id = $1", lineage_id))
            status = await pool.fetchrow(
                "SELECT status, pause_reason FROM edge_table_lineages WHERE id = $1", lineage_id)
            assert tuple(status) == ("paused", "schema_review")
            assert review.classification == "ambiguous"

            async with pool.acquire() as conn:
                claimed = await governance.claim_review(conn, review.id, actor="op",
                                                        action_version=1)
                await governance.approve_review(conn, review.id, actor="op",
                                                action_version=claimed.action_version,
                                                column_actions=None)
            table = await pool.fetchval(
                "SELECT target_table FROM edge_table_lineages WHERE id = $1", lineage_id)
            expected = sqlite_rows(db)
            await eventually(lambda: _equal(pool, table, expected))

            app(db, "UPDATE players SET score = score + 100 WHERE id % 7 = 0",
                "DELETE FROM players WHERE id BETWEEN 20 AND 40",
                "INSERT INTO players VALUES (201, 'late', 0.25, x'cafe')",
                "UPDATE players SET id = 1000 WHERE id = 1")
            await agent.flush()
            expected = sqlite_rows(db)
            await eventually(lambda: _equal(pool, table, expected))
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
        cloud = await cloud_rows(pool, table)
        assert cloud == expected and len(cloud) == 181
        photo = {r[0]: r[3] for r in cloud}
        assert photo[500] == b"\x00\xff\x10" and photo[201] == b"\xca\xfe"
        lineage = await pool.fetchrow("SELECT * FROM edge_table_lineages WHERE id = $1",
                                      lineage_id)
        assert lineage["status"] == "active" and lineage["staged_rows"] == 0
        assert lineage["materialization_errors"] == 0
        worker.cancel()


async def _equal(pool: asyncpg.Pool, table: str, expected: list[tuple[Any, ...]]) -> bool:
    return await cloud_rows(pool, table) == expected
