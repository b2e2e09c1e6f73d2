"""Two ``edgesync serve`` workers consume the one AMQP queue behind RabbitMQ's MQTT
plugin while the real agent (topic slug and device name both holding a dot) publishes
row and telemetry batches through the plugin; one worker is killed with SIGKILL in the
middle of the stream. What it held unacknowledged goes to the other worker; the cloud
then equals SQLite exactly (no row lost, none doubled: the ledger makes a redelivery a
no-op), and the progress confirmations, which go out over MQTT through the plugin,
drain the agent's journal."""

from __future__ import annotations

import asyncio
import contextlib
import random
import sqlite3
import threading
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aio_pika
import asyncpg
import pytest
from kits.e2e_kit import (
    Device,
    actions,
    app,
    approve,
    eventually,
    register,
    running_agent,
    sqlite_rows,
    target_of,
    ts_rows,
    utc,
    wait_equal,
    wait_reviews,
    wait_rows,
)
from kits.review_helpers import claim_and_approve
from kits.write_load import write_load
from scale_kit import Worker

pytestmark = [pytest.mark.e2e, pytest.mark.once, pytest.mark.timeout(240)]

COLS = ["id", "n", "s", "x"]
T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)


def journal_count(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(db, timeout=10)) as conn:
        return int(conn.execute("SELECT count(*) FROM __edgesync_journal").fetchone()[0])


async def journal_drained(db: Path) -> bool:
    """Every journaled change confirmed (the journal's top row always stays)."""
    return journal_count(db) <= 1


async def columns_known(pool: asyncpg.Pool, device_id: uuid.UUID, table: str) -> bool:
    return bool(await pool.fetchval(
        "SELECT count(*) FROM edge_schema_versions v JOIN edge_table_lineages l "
        "ON l.id = v.lineage_id WHERE l.device_id = $1 AND l.source_table = $2 "
        "AND v.schema_columns IS NOT NULL", device_id, table))


async def rejections(pool: asyncpg.Pool, device_id: uuid.UUID) -> dict[str, int]:
    """Rejected batches of the device by rejection code."""
    rows = await pool.fetch("SELECT rejection_code, count(*) AS n FROM edge_export_segments "
                            "WHERE device_id = $1 AND outcome = 'rejected' GROUP BY 1",
                            device_id)
    return {r["rejection_code"]: r["n"] for r in rows}


async def readings_equal(pool: asyncpg.Pool, dev: Device) -> None:
    table = await target_of(pool, dev, "readings")
    want = [(utc(ts), i, temp) for i, ts, temp in
            sqlite_rows(dev.db, "SELECT id, ts, temp FROM readings ORDER BY ts")]
    assert len(want) > 100
    try:
        await wait_rows(lambda: ts_rows(pool, table, dev, ["id", "temp"]), want,
                        "readings: cloud equals SQLite", 90)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; batches rejected: "
                             f"{await rejections(pool, dev.id)}") from None


def telemetry_load(path: Path, stop: threading.Event, errors: list[BaseException]) -> None:
    """Readings in small transactions, one distinct timestamp each, until ``stop``."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA busy_timeout = 5000")
    try:
        i = 0
        while not stop.is_set():
            db.execute("BEGIN")
            for _ in range(3):
                i += 1
                db.execute("INSERT INTO readings VALUES (?, ?, ?)",
                           (i, (T0 + timedelta(milliseconds=10 * i)).isoformat(), i / 8))
            db.execute("COMMIT")
            stop.wait(0.01)
    except BaseException as exc:
        errors.append(exc)
    finally:
        db.close()


@pytest.mark.parametrize("telemetry", [
    pytest.param(False, id="rows"),
    pytest.param(True, id="rows+telemetry"),
])
async def test_worker_killed_9_on_the_amqp_queue_loses_and_doubles_nothing(
        tmp_path: Path, pool: asyncpg.Pool, database_url: str, amqp_url: str,
        plugin_mqtt_url: str, unique: str, telemetry: bool) -> None:
    """``rows+telemetry`` adds a telemetry table: the two workers commit its batches out of
    order, and each must still be accepted (a lower ``batch_seq`` that is not taken is
    a delayed batch, docs/protocol.md; a failure names the rejection codes); ``rows`` is
    the same run without telemetry."""
    rnd = random.Random()
    queue = f"edgesync.test.{unique}"
    workers = [Worker(f"w{n}", tmp_path / f"w{n}.log", [
        "--database-url", database_url, "--mqtt-url", plugin_mqtt_url,
        "--amqp-url", amqp_url, "--amqp-queue", queue, "--client-id", f"w{n}-{unique}",
        "--api-port", "0", "--data-dir", str(tmp_path / f"w{n}")]) for n in (1, 2)]
    dev = await register(pool, tmp_path, plugin_mqtt_url, unique, tag="amqp.k9",
                         flush_interval="100ms", confirm_timeout="2s",
                         telemetry={"readings": "ts"})
    assert "." in dev.scope.topic_slug and "." in dev.scope.device_name
    app(dev.db, "CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, s TEXT, x REAL)")
    if telemetry:
        app(dev.db, "CREATE TABLE readings (id INTEGER PRIMARY KEY, ts TEXT NOT NULL, "
                    "temp REAL)")
    stop, done = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    rows = threading.Thread(target=write_load, args=(dev.db, 11, stop, errors, done),
                            kwargs={"at_least": 400}, daemon=True)
    readings = threading.Thread(target=telemetry_load, args=(dev.db, stop, errors),
                                daemon=True)
    try:
        for w in workers:
            await w.start("ingest consuming")
        async with running_agent(dev):
            rows.start()
            await approve(pool, dev, "t")
            if telemetry:
                readings.start()
                queued = await wait_reviews(pool, dev, {"readings"})
                await eventually(lambda: columns_known(pool, dev.id, "readings"),
                                 what="readings: schema columns known")
                await claim_and_approve(pool, queued["readings"],
                                        actions(ts="ignore", id="mirror", temp="mirror"))
                await target_of(pool, dev, "readings")
            await asyncio.sleep(rnd.uniform(0.5, 2.0))  # mid-stream
            await workers[0].kill9()
            await asyncio.sleep(2)
            stop.set()
            await asyncio.to_thread(done.wait, 90)
            if telemetry:
                readings.join(30)
            assert done.is_set() and not readings.is_alive(), "the load did not finish"
            assert errors == [], f"the application saw {errors[:3]}"
            got = await wait_equal(pool, dev, "t", COLS, limit=90)
            assert len(got) > 100
            if telemetry:
                await readings_equal(pool, dev)
            await eventually(lambda: journal_drained(dev.db), 60,
                             f"journal drained (has {journal_count(dev.db)} rows)")
        assert workers[1].running, f"the surviving worker exited:\n{workers[1].text()}"
        twice = await pool.fetchval(
            "SELECT count(*) FROM (SELECT batch_id FROM edge_export_segments "
            "WHERE device_id = $1 GROUP BY batch_id HAVING count(*) > 1) d", dev.id)
        assert twice == 0
        assert "Traceback" not in workers[1].text(), workers[1].text()[-4000:]
    finally:
        stop.set()
        for w in workers:
            await w.stop()
        with contextlib.suppress(aio_pika.exceptions.AMQPError, OSError):
            connection = await aio_pika.connect(amqp_url)
            async with connection:
                await (await connection.channel()).queue_delete(queue)
