"""Two ``edgesync serve`` workers sharing the ingest through MQTT shared subscriptions
(``--shared-group``) on a private Mosquitto, with duplicated and shuffled delivery.

The real agent publishes a device's row (and telemetry) batches; every batch is
captured from the broker. The captured batches are then the first delivery for a twin
device, each twice, in a shuffled order, published while the two workers split them:
the first half arrives under review (staged), the tables are approved, the second half
arrives live, with the staged batches replaying meanwhile. The twin's targets then
equal the device's SQLite exactly, and its ledger has each batch once."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest
from kits.e2e_kit import (
    Device,
    Wire,
    actions,
    app,
    eventually,
    register,
    reviews,
    sqlite_rows,
    state_rows,
    target_of,
    ts_rows,
    utc,
    wait_lineage,
    wait_rows,
)
from kits.review_helpers import claim_and_approve
from scale_kit import Worker

from edgesync.agent import Agent, load_config
from edgesync.protocol import mqtt_client, parse_broker_url

pytestmark = [pytest.mark.e2e, pytest.mark.once, pytest.mark.timeout(240)]

T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)
ROW_TABLES = {"events", "settings"}


def workload(step: int, telemetry: bool) -> list[Any]:
    """Step ``step`` of the application: inserts, replaces, deletes and a key change in
    small transactions, so the agent sends many batches."""
    base = step * 40
    out: list[Any] = [
        ("INSERT INTO events VALUES (?, ?, ?)",
         [(i, f"k{i % 3}", f"b{i}") for i in range(base, base + 40)]),
        ("INSERT OR REPLACE INTO settings VALUES (?, ?, ?)",
         [(f"s{i % 30:02}", f"v{step}-{i}", i) for i in range(base, base + 20)]),
        f"DELETE FROM settings WHERE level % 7 = {step % 7}",
        f"UPDATE settings SET key = key || 'x' WHERE key = 's{step % 30:02}'",
        f"DELETE FROM events WHERE id % 11 = {step % 11} AND id < {base}",
    ]
    if telemetry:
        out.append(("INSERT INTO readings VALUES (?, ?, ?)",
                    [(i, (T0 + timedelta(seconds=i)).isoformat(), i / 4)
                     for i in range(base, base + 40)]))
    return out


async def ledger_batches(pool: asyncpg.Pool, dev: Device) -> int:
    return int(await pool.fetchval("SELECT count(DISTINCT batch_id) FROM edge_export_segments "
                                   "WHERE device_id = $1", dev.id))


async def approve_ready(pool: asyncpg.Pool, dev: Device, tables: set[str],
                        approved: set[str]) -> None:
    """Approve each table of ``tables`` whose review is queued and whose columns the
    cloud has seen (the batch carrying them may not have arrived yet)."""
    queued = await reviews(pool, dev, status="queued")
    known = {r["source_table"] for r in await pool.fetch(
        "SELECT l.source_table FROM edge_schema_versions v JOIN edge_table_lineages l "
        "ON l.id = v.lineage_id WHERE l.device_id = $1 AND v.schema_columns IS NOT NULL",
        dev.id)}
    for table in sorted((tables - approved) & known & set(queued)):
        column_actions = actions(ts="ignore", id="mirror", temp="mirror") \
            if table == "readings" else None
        await claim_and_approve(pool, queued[table], column_actions)
        approved.add(table)


async def wait_match(pool: asyncpg.Pool, twin: Device, db: Path, telemetry: bool) -> None:
    events = await target_of(pool, twin, "events")
    settings = await target_of(pool, twin, "settings")
    await wait_rows(lambda: state_rows(pool, events, twin, ["id", "kind", "body"]),
                    sqlite_rows(db, "SELECT * FROM events ORDER BY id"), "events", 60)
    await wait_rows(lambda: state_rows(pool, settings, twin, ["key", "value", "level"]),
                    sqlite_rows(db, "SELECT * FROM settings ORDER BY key"), "settings", 60)
    if telemetry:
        readings = await target_of(pool, twin, "readings")
        want = [(utc(ts), i, temp)
                for i, ts, temp in sqlite_rows(db, "SELECT * FROM readings ORDER BY ts")]
        await wait_rows(lambda: ts_rows(pool, readings, twin, ["id", "temp"]), want,
                        "readings", 60)


async def rejected(pool: asyncpg.Pool, dev: Device) -> dict[str, int]:
    """Rejected batches of the device by rejection code."""
    rows = await pool.fetch("SELECT rejection_code, count(*) AS n FROM edge_export_segments "
                            "WHERE device_id = $1 AND outcome = 'rejected' GROUP BY 1", dev.id)
    return {r["rejection_code"]: r["n"] for r in rows}


@pytest.mark.parametrize("telemetry", [
    pytest.param(False, id="rows"),
    pytest.param(True, id="rows+telemetry"),
])
async def test_two_workers_on_a_shared_subscription_with_duplicated_shuffled_batches(
        tmp_path: Path, pool: asyncpg.Pool, database_url: str, private_mqtt: str,
        unique: str, telemetry: bool) -> None:
    """``rows+telemetry`` adds a telemetry table: its shuffled batches, committed out of
    order by two workers, must each be accepted once (a lower ``batch_seq`` that is not
    taken is a delayed batch, docs/protocol.md; a failure names the rejection codes)."""
    group = f"g-{unique}"
    workers = [Worker(f"w{n}", tmp_path / f"w{n}.log", [
        "--database-url", database_url, "--mqtt-url", private_mqtt,
        "--shared-group", group, "--client-id", f"w{n}-{unique}",
        "--api-port", "0", "--data-dir", str(tmp_path / f"w{n}")]) for n in (1, 2)]
    tables = ROW_TABLES | ({"readings"} if telemetry else set())
    src = await register(pool, tmp_path, private_mqtt, unique, tag="src",
                         telemetry={"readings": "ts"})
    twin = await register(pool, tmp_path, private_mqtt, unique, tag="twin",
                          telemetry={"readings": "ts"})
    schema = ["CREATE TABLE events (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, body TEXT)",
              "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT, level INTEGER)"]
    if telemetry:
        schema.append("CREATE TABLE readings (id INTEGER PRIMARY KEY, ts TEXT NOT NULL, "
                      "temp REAL)")
    app(src.db, *schema)
    try:
        for w in workers:
            await w.start("ingest subscribed")
        # the device's batches, as the agent sends them (the workers stage them)
        async with Wire(private_mqtt, src.root, unique) as capture, \
                Agent(load_config(src.config)) as agent:
            for step in range(12):
                app(src.db, *workload(step, telemetry))
                await agent.flush()

            async def all_captured() -> bool:
                return await ledger_batches(pool, src) == len(
                    capture.distinct_batches("rows") + capture.distinct_batches("telemetry"))

            await eventually(all_captured, 60, "every batch captured and seen by the cloud")
            sent = capture.distinct_batches("rows") + capture.distinct_batches("telemetry")
        assert len(sent) > 20
        assert {orjson.loads(p)["source_table"] for _, p in sent} == tables
        # the twin's first delivery: every batch twice, shuffled
        shuffled = [(t.replace(src.root, twin.root, 1), p) for t, p in sent] * 2
        seed = random.randrange(1, 10**6)
        random.Random(seed).shuffle(shuffled)
        half = len(shuffled) // 2
        first_ids = {orjson.loads(p)["batch_id"] for _, p in shuffled[:half]}
        approved: set[str] = set()
        async with mqtt_client(parse_broker_url(private_mqtt),
                               identifier=f"replayer-{unique}-{uuid.uuid4().hex[:6]}",
                               clean_session=True) as client:
            for topic, payload in shuffled[:half]:
                await client.publish(topic, payload, qos=1)
            await eventually(lambda: _is(ledger_batches(pool, twin), len(first_ids)), 60,
                             f"seed {seed}: first half in the ledger")
            await approve_ready(pool, twin, tables, approved)
            for topic, payload in shuffled[half:]:
                await client.publish(topic, payload, qos=1)
        try:
            await eventually(lambda: _is(ledger_batches(pool, twin), len(sent)), 60,
                             f"seed {seed}: every batch in the ledger")

            async def all_approved() -> bool:
                await approve_ready(pool, twin, tables, approved)
                return approved == tables

            await eventually(all_approved, 60, f"seed {seed}: every table approved")
            for t in tables:
                await wait_lineage(pool, twin, t, lambda r: r["staged_rows"] == 0 and
                                   r["status"] == "active", f"seed {seed}: replayed", 60)
            await wait_match(pool, twin, src.db, telemetry)
        except AssertionError as exc:  # say what the cloud refused, and the reviews
            states = {t: r.status for t, r in (await reviews(pool, twin)).items()}
            raise AssertionError(f"{exc}; batches rejected: {await rejected(pool, twin)}; "
                                 f"approved {sorted(approved)}; reviews {states}") from None
        twice = await pool.fetchval(
            "SELECT count(*) FROM (SELECT batch_id FROM edge_export_segments "
            "WHERE device_id = $1 AND outcome <> 'rejected' GROUP BY batch_id "
            "HAVING count(*) > 1) d", twin.id)
        assert twice == 0
        for w in workers:
            assert w.running, f"{w.name} exited:\n{w.text()}"
    finally:
        for w in workers:
            await w.stop()


async def _is(value: Any, want: int) -> bool:
    return bool(await value == want)
