"""Duplicate and shuffled redelivery of every batch a device published.

Every message the agent publishes is captured from the broker. Once the cloud matches
SQLite, all of them are fed again, shuffled, straight into an ``IngestPipeline`` and
re-published over MQTT to the running worker: each batch is answered ``duplicate``,
the ledger gains no row and the targets do not change. Then the same captured row
batches, shuffled and each twice, are the *first* delivery for a second device: they
stage under review in any order, and after approval its targets match SQLite too."""

from __future__ import annotations

import random
from collections import Counter
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
    cloud,
    eventually,
    lineage,
    pool_of,
    register,
    sqlite_rows,
    state_rows,
    target_of,
    ts_rows,
    utc,
    wait_lineage,
    wait_reviews,
    wait_rows,
)
from kits.review_helpers import claim_and_approve

from edgesync.agent import Agent, load_config
from edgesync.ingest import IngestPipeline, OutcomeStatus
from edgesync.materialize import quote_ident
from edgesync.protocol import mqtt_client, parse_broker_url
from edgesync.server import Server

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)
SCHEMA = (
    "CREATE TABLE events (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, body TEXT)",
    "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT, level INTEGER, blob BLOB)",
    "CREATE TABLE readings (id INTEGER PRIMARY KEY, ts TEXT NOT NULL, temp REAL)",
)
TABLES = {"events", "settings", "readings"}


def workload(step: int) -> list[Any]:
    """Step ``step`` of the application's writes: small transactions, so the agent
    publishes many batches."""
    base = step * 50
    return [
        ("INSERT INTO events VALUES (?, ?, ?)",
         [(i, f"k{i % 3}", f"b{i}") for i in range(base, base + 50)]),
        ("INSERT OR REPLACE INTO settings VALUES (?, ?, ?, ?)",
         [(f"s{i % 40:02}", f"v{step}-{i}", i, bytes([step % 256, i % 256]))
          for i in range(base, base + 25)]),
        f"DELETE FROM settings WHERE level % 7 = {step % 7}",
        f"UPDATE settings SET key = key || 'x' WHERE key = 's{step % 40:02}'",
        ("INSERT INTO readings VALUES (?, ?, ?)",
         [(i, (T0 + timedelta(seconds=i)).isoformat(), i / 4) for i in range(base, base + 50)]),
    ]


class Views:
    """The device's three tables as the cloud shows them, for one device."""

    def __init__(self, pool: asyncpg.Pool, dev: Device) -> None:
        self.pool, self.dev = pool, dev

    async def events(self) -> list[tuple[Any, ...]]:
        table = await target_of(self.pool, self.dev, "events")
        return await state_rows(self.pool, table, self.dev, ["id", "kind", "body"], "id")

    async def settings(self) -> list[tuple[Any, ...]]:
        table = await target_of(self.pool, self.dev, "settings")
        return await state_rows(self.pool, table, self.dev, ["key", "value", "level", "blob"],
                                "key")

    async def readings(self) -> list[tuple[Any, ...]]:
        table = await target_of(self.pool, self.dev, "readings")
        return await ts_rows(self.pool, table, self.dev, ["id", "temp"])

    async def everything(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every target row with its platform columns (tombstones included)."""
        out = {}
        for t in TABLES:
            table = await target_of(self.pool, self.dev, t)
            rows = await self.pool.fetch(f"SELECT * FROM {quote_ident(table)} WHERE device_id = $1",
                                         self.dev.id)
            out[t] = sorted(tuple(str(v) for k, v in r.items() if k != "_edge_synced_at")
                            for r in rows)
        return out

    async def wait_match(self, db: Path, what: str) -> None:
        await wait_rows(self.events, sqlite_rows(db, "SELECT * FROM events ORDER BY id"),
                         f"{what}: events")
        await wait_rows(self.settings, sqlite_rows(db, "SELECT * FROM settings ORDER BY key"),
                         f"{what}: settings")
        await wait_rows(self.readings, [
            (utc(ts), i, temp)
            for i, ts, temp in sqlite_rows(db, "SELECT * FROM readings ORDER BY ts")],
            f"{what}: readings")


async def approve_all(pool: asyncpg.Pool, dev: Device) -> None:
    queued = await wait_reviews(pool, dev, TABLES)

    async def with_columns() -> bool:
        async with pool.acquire() as conn:
            n = await conn.fetchval(
                "SELECT count(*) FROM edge_schema_versions v JOIN edge_table_lineages l "
                "ON l.id = v.lineage_id WHERE l.device_id = $1 AND v.schema_columns IS NOT NULL",
                dev.id)
        return bool(n == len(TABLES))

    await eventually(with_columns, what="every schema's columns known")
    await claim_and_approve(pool, queued["events"], None)
    await claim_and_approve(pool, queued["settings"], None)
    await claim_and_approve(pool, queued["readings"],
                            actions(ts="ignore", id="mirror", temp="mirror"))


async def ledger(pool: asyncpg.Pool, dev: Device) -> Counter[str]:
    rows = await pool.fetch("SELECT outcome, count(*) AS n FROM edge_export_segments "
                            "WHERE device_id = $1 GROUP BY outcome", dev.id)
    return Counter({r["outcome"]: r["n"] for r in rows})


async def counters(pool: asyncpg.Pool, dev: Device) -> dict[str, tuple[int, int, int]]:
    out = {}
    for t in TABLES:
        rec = await lineage(pool, dev, t)
        assert rec is not None
        out[t] = (rec["materialized_rows"], rec["staged_rows"], rec["rejected_batches"])
    return out


async def test_duplicate_and_shuffled_redelivery(tmp_path: Path, database_url: str,
                                                 mqtt_url: str, unique: str) -> None:
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag="redeliver",
                             telemetry={"readings": "ts"})
        app(dev.db, *SCHEMA)
        async with Wire(mqtt_url, dev.scope.root_topic, unique) as capture, \
                Agent(load_config(dev.config)) as agent:
            for step in range(4):  # under review: staged
                app(dev.db, *workload(step))
                await agent.flush()
            await approve_all(pool, dev)
            for step in range(4, 10):  # live
                app(dev.db, *workload(step))
                await agent.flush()
            view = Views(pool, dev)
            await view.wait_match(dev.db, "first delivery")
            await eventually(lambda: _captured_all(pool, dev, capture),
                             what="capture saw every accepted batch")
        await _redeliver(server, pool, dev, view, capture, mqtt_url, unique)
        await _first_delivery_shuffled(pool, tmp_path, mqtt_url, unique, dev, capture)


async def _captured_all(pool: asyncpg.Pool, dev: Device, capture: Wire) -> bool:
    accepted = await pool.fetchval("SELECT count(*) FROM edge_export_segments "
                                   "WHERE device_id = $1 AND outcome <> 'rejected'", dev.id)
    sent = capture.distinct_batches("rows") + capture.distinct_batches("telemetry")
    return bool(len(sent) == accepted)


async def _redeliver(server: Server, pool: asyncpg.Pool, dev: Device, view: Views,
                     capture: Wire, mqtt_url: str, unique: str) -> None:
    rng = random.Random(4)
    before = (await view.everything(), await ledger(pool, dev), await counters(pool, dev))
    assert before[1]["rejected"] == 0
    messages = list(capture.messages)
    batches = [m for m in messages if m[0].endswith("/batch")]
    assert len(batches) > 20

    # Straight into a pipeline of our own, shuffled, every message twice.
    pipe = IngestPipeline(pool)
    again = messages * 2
    rng.shuffle(again)
    outcomes = Counter()
    for topic, payload in again:
        out = await pipe.handle(topic, payload)
        if topic.endswith("/batch"):
            outcomes[out.status] += 1
    assert outcomes == {OutcomeStatus.DUPLICATE: 2 * len(batches)}

    # And over MQTT to the running worker.
    assert server.pipeline is not None
    seen = server.pipeline.counters["duplicate"]
    shuffled = list(batches)
    rng.shuffle(shuffled)
    async with mqtt_client(parse_broker_url(mqtt_url), identifier=f"replayer-{unique}",
                           clean_session=True) as client:
        for topic, payload in shuffled:
            await client.publish(topic, payload, qos=1)

    async def all_answered() -> bool:
        return server.pipeline is not None and \
            server.pipeline.counters["duplicate"] >= seen + len(shuffled)

    await eventually(all_answered, what="worker answered every re-published batch")
    after = (await view.everything(), await ledger(pool, dev), await counters(pool, dev))
    assert after[0] == before[0], "a redelivery changed a target"
    assert after[1] == before[1], "a redelivery added ledger rows"
    assert after[2] == before[2], "a redelivery moved lineage counters"
    await view.wait_match(dev.db, "after redelivery")


async def _first_delivery_shuffled(pool: asyncpg.Pool, tmp_path: Path, mqtt_url: str,
                                   unique: str, dev: Device, capture: Wire) -> None:
    """The captured batches as the first delivery for a twin device: row batches in
    any order (and twice); telemetry in batch_seq order (a lower batch_seq after a
    higher one is ``stale_batch_seq`` by the protocol)."""
    twin = await register(pool, tmp_path, mqtt_url, unique, tag="twin")
    root, twin_root = dev.scope.root_topic, twin.scope.root_topic
    rows = [(t.replace(root, twin_root, 1), p) for t, p in capture.distinct_batches("rows")] * 2
    random.Random(7).shuffle(rows)
    telemetry = sorted(((t.replace(root, twin_root, 1), p)
                        for t, p in capture.distinct_batches("telemetry")),
                       key=lambda m: orjson.loads(m[1])["batch_seq"])
    pipe = IngestPipeline(pool)
    statuses = Counter()
    for topic, payload in rows + telemetry + telemetry:
        statuses[(await pipe.handle(topic, payload)).status] += 1
    unique_batches = len(rows) // 2 + len(telemetry)
    assert statuses == {OutcomeStatus.STAGED: unique_batches,
                        OutcomeStatus.DUPLICATE: unique_batches}
    await approve_all(pool, twin)
    for t in TABLES:
        await wait_lineage(pool, twin, t, lambda r: r["staged_rows"] == 0 and
                           r["status"] == "active", "twin replayed")
    await Views(pool, twin).wait_match(dev.db, "twin, shuffled first delivery")
    assert (await ledger(pool, twin))["rejected"] == 0
