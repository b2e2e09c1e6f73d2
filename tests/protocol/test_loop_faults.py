"""``edgesync serve`` outlives its database and its broker: the real server (in-process,
every background loop in its TaskGroup) and a real agent run against a PostgreSQL
cluster and a Mosquitto this test owns, while an application writes. PostgreSQL is
restarted (``pg_ctl restart -m fast``) several times, the broker twice, and PostgreSQL
stopped for a few seconds (longer than any loop's interval); after each,
the server task is still running, and afterwards every loop works again: rows written
after the restarts are materialized (ingest), an approval given after them replays the
staged rows (the replayer's new LISTEN connection), a control enqueued after them is
published and acknowledged (outbox sender, control publisher, ingest of the ack), and
the agent's journal drains (progress reporter). The cloud ends equal to SQLite: what a
restart dropped the agent sent again."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from kits.e2e_kit import Device, app, approve, eventually, register, running_agent, wait_equal
from kits.fault_kit import servers

from edgesync.control import BackpressureSweeper, ControlSender, enqueue_control
from edgesync.server import Server, ServerSettings

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.once, pytest.mark.timeout(420)]

COLS = ["id", "n"]
PG_RESTARTS = int(os.environ.get("EDGESYNC_FAULT_PG_RESTARTS", "4"))


@contextlib.asynccontextmanager
async def writing(db: Path, start: int) -> AsyncIterator[None]:
    """The application: a new row and an update of an older one every 50 ms."""

    async def write() -> None:
        i = start
        while True:
            i += 1
            await asyncio.to_thread(app, db, ("INSERT INTO t VALUES (?, ?)", [(i, 0)]),
                                    ("UPDATE t SET n = n + 1 WHERE id = ?", [(i // 2,)]))
            await asyncio.sleep(0.05)

    task = asyncio.create_task(write(), name="test.application")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def journal_count(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(db, timeout=10)) as conn:
        return int(conn.execute("SELECT count(*) FROM __edgesync_journal").fetchone()[0])


async def journal_drained(db: Path) -> bool:
    """Every change confirmed by a progress control (the journal's top row stays)."""
    return journal_count(db) <= 1


def row_count(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(db, timeout=10)) as conn:
        return int(conn.execute("SELECT coalesce(max(id), 0) FROM t").fetchone()[0])


async def tolerant(probe: Callable[[], Awaitable[Any]]) -> Any:
    """The test's own queries may meet a connection the last restart closed."""
    try:
        return await probe()
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
        return None


async def control_acked(pool: asyncpg.Pool, dev: Device, what: str) -> None:
    """A control enqueued now is sent and acknowledged by the agent."""

    async def enqueue() -> Any:
        async with pool.acquire() as conn:
            return await enqueue_control(conn, device_id=dev.id, lineage_id=None,
                                         kind="edgesync_test_noop", body={"source_table": "t"})

    control_id = await eventually(lambda: tolerant(enqueue), 30, f"{what}: control enqueued")

    async def acked() -> bool:
        status = await pool.fetchval("SELECT status FROM edge_pending_controls WHERE id = $1",
                                     control_id)
        return status == "acked"

    await eventually(lambda: tolerant(acked), 60, f"{what}: control acknowledged")


async def test_serve_survives_database_and_broker_restarts(
        unique: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    async with servers() as (cluster, broker, root):
        settings = ServerSettings(database_url=cluster.url, mqtt_url=broker.url,
                                  data_dir=root / "cloud", client_id=f"worker-{unique}",
                                  api_port=0)
        async with Server(settings) as server:
            pool = server.pool
            assert pool is not None and server.publisher is not None
            server.controls = ControlSender(pool, server.publisher, poll_interval=0.5)
            server.sweeper = BackpressureSweeper(pool, interval=0.5)
            serving = asyncio.create_task(server.run(), name="test.worker")

            def still_serving(after: str) -> None:
                assert not serving.done(), f"serve stopped after {after}: {serving!r}"

            try:
                await server.wait_ready()
                dev = await register(pool, root, broker.url, unique, tag="faults",
                                     flush_interval="100ms", confirm_timeout="2s")
                app(dev.db, "CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER)")
                async with running_agent(dev):
                    # Batches flow (staged: the schema waits for review) while the
                    # database restarts under every loop.
                    async with writing(dev.db, 0):
                        await eventually(lambda: tolerant(lambda: pool.fetchval(
                            "SELECT count(*) FROM edge_staged_rows")), 60, "first batch staged")
                        for n in range(1, PG_RESTARTS + 1):
                            await cluster.restart()
                            await asyncio.sleep(1.5)  # batches meet the fresh server
                            still_serving(f"PostgreSQL restart {n}")
                    # Approved after the restarts: the replayer's new LISTEN connection
                    # hears it; rows written after the restarts materialize live.
                    await approve(pool, dev, "t", limit=60)
                    await wait_equal(pool, dev, "t", COLS, limit=120)
                    await control_acked(pool, dev, "after the PostgreSQL restarts")
                    await eventually(lambda: journal_drained(dev.db), 60,
                                     f"journal drained (has {journal_count(dev.db)} rows)")
                    still_serving("the PostgreSQL restarts")

                    async with writing(dev.db, row_count(dev.db)):
                        for n in (1, 2):
                            await asyncio.sleep(1.5)
                            await broker.restart()
                            still_serving(f"broker restart {n}")
                        await asyncio.sleep(1.5)
                        await cluster.outage(4)  # and the database down for a while
                        await asyncio.sleep(1.5)
                        still_serving("the PostgreSQL outage")
                    await wait_equal(pool, dev, "t", COLS, limit=120)
                    await control_acked(pool, dev, "after the broker restarts")
                    await eventually(lambda: journal_drained(dev.db), 60,
                                     f"journal drained (has {journal_count(dev.db)} rows)")
                still_serving("everything")
            finally:
                serving.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await serving
    # Every loop met the faults (it logged a failure) and recovered (it said so, and the
    # checks above saw its work done after them).
    text = caplog.text
    assert "replay: StoreError: the connection listening on" in text
    assert "control sender: StoreError: the connection listening on" in text
    for loop in ("replay", "control sender", "progress reporter", "backpressure sweep",
                 "object ingest", f"control publisher on {broker.url}",
                 f"MQTT broker {broker.url}"):
        assert f"{loop}: recovered after" in text, f"{loop} did not recover"
