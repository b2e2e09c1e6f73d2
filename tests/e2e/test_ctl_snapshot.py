"""Bootstrap snapshots end to end (real Mosquitto, PostgreSQL, agent and server): a
table pre-filled with 200,000 rows before the agent ever ran is seeded once
(``snapshot_on_first_run``), staged under review, replayed on approval and
materialized completely; and the same with a journal budget far too small for the
snapshot, so the agent reports a capture gap and re-seeds the table by a
``bootstrap_snapshot`` object uploaded through the server's HTTP API."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest
from control_kit import (
    journal_drained,
)
from kits.e2e_kit import (
    Device,
    app,
    approve,
    cloud,
    eventually,
    pool_of,
    register,
    running_agent,
    target_of,
    wait_equal,
    wait_lineage,
)

from edgesync.materialize import quote_ident

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

N = 200_000
COLS = ["id", "v", "n"]
# the snapshot is staged under review before approval: keep it under the volume caps
POLICY = {"max_pending_rows_per_lineage": 10 * N}


def prefill(dev: Device) -> None:
    app(dev.db, "CREATE TABLE big (id INTEGER PRIMARY KEY, v TEXT, n INTEGER)",
        ("INSERT INTO big VALUES (?, ?, ?)", ((i, f"row-{i}", i % 977) for i in
                                               range(1, N + 1))))


async def totals(pool: asyncpg.Pool, dev: Device) -> tuple[int, int]:
    target = await target_of(pool, dev, "big")
    rec = await pool.fetchrow(f"SELECT count(*) AS c, coalesce(sum(id), 0) AS s FROM "
                              f"{quote_ident(target)} WHERE device_id = $1 AND NOT "
                              "_edge_deleted", dev.id)
    assert rec is not None
    return int(rec["c"]), int(rec["s"])


async def materialized_completely(pool: asyncpg.Pool, dev: Device, extra: int = 0) -> None:
    want = (N + extra, sum(range(1, N + extra + 1)))

    async def probe() -> bool:
        return await totals(pool, dev) == want

    await eventually(probe, 90, "all rows materialized (count and sum(id))")
    await wait_equal(pool, dev, "big", COLS, limit=30)


async def test_snapshot_of_200k_rows_materializes_completely(
        tmp_path: Path, database_url: str, mqtt_url: str, unique: str) -> None:
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag="snap", policy=POLICY,
                             snapshot_on_first_run=True)
        prefill(dev)
        async with running_agent(dev):
            await wait_lineage(pool, dev, "big", lambda r: r["staged_rows"] >= N,
                               "the whole snapshot staged under review", limit=90)
            await approve(pool, dev, "big")
            await materialized_completely(pool, dev)
            # incremental capture goes on after the snapshot: no gap, no duplicate
            app(dev.db, ("INSERT INTO big VALUES (?, ?, ?)",
                         [(i, f"row-{i}", 1) for i in range(N + 1, N + 11)]),
                "UPDATE big SET v = 'x' WHERE id % 50000 = 0")
            await materialized_completely(pool, dev, extra=10)
            await eventually(lambda: journal_drained(dev.db), 60, "journal drained")


async def test_snapshot_over_default_caps_pauses_then_drains(
        tmp_path: Path, database_url: str, mqtt_url: str, unique: str) -> None:
    """With the default caps (100,000 staged rows) the snapshot pauses the device while
    under review; approval replays, the sweep resumes it and the rest drains."""
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag="caps",
                             snapshot_on_first_run=True)
        prefill(dev)
        async with running_agent(dev):
            rec = await wait_lineage(pool, dev, "big", lambda r: r["paused_by_control"],
                                     "paused by backpressure", limit=60)
            assert rec["staged_rows"] < N
            await approve(pool, dev, "big")
            await materialized_completely(pool, dev)
            await wait_lineage(pool, dev, "big", lambda r: r["status"] == "active"
                               and not r["paused_by_control"], "resumed")
            await eventually(lambda: journal_drained(dev.db), 60, "journal drained")


async def test_snapshot_over_budget_reseeds_by_upload(
        tmp_path: Path, database_url: str, mqtt_url: str, unique: str) -> None:
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag="reseed", policy=POLICY,
                             snapshot_on_first_run=True, local_retention_bytes="512KiB")
        prefill(dev)
        async with running_agent(dev):
            # the snapshot overflows the journal budget: a reported gap, then a re-seed
            await eventually(lambda: _gap_reported(pool, dev), 60, "capture gap reported")
            await approve(pool, dev, "big", limit=60)

            async def ingested() -> list[asyncpg.Record] | None:
                ups = await pool.fetch("SELECT * FROM edge_uploads WHERE device_id = $1 AND "
                                       "source_table = 'big'", dev.id)
                return ups if ups and all(u["status"] == "ingested" for u in ups) else None

            ups = await eventually(ingested, 90, "bootstrap_snapshot upload ingested")
            assert any(u["segment_kind"] == "bootstrap_snapshot" for u in ups)
            assert all(u["last_error"] is None for u in ups)
            assert sum(u["rows_ingested"] for u in ups) >= N
            await materialized_completely(pool, dev)
            app(dev.db, ("INSERT INTO big VALUES (?, ?, ?)",
                         [(i, f"row-{i}", 1) for i in range(N + 1, N + 11)]),
                "DELETE FROM big WHERE id = 7", "INSERT INTO big VALUES (7, 'again', 7)")
            await materialized_completely(pool, dev, extra=10)
            await eventually(lambda: journal_drained(dev.db), 60, "journal drained")


async def _gap_reported(pool: asyncpg.Pool, dev: Device) -> bool:
    return bool(await pool.fetchval(
        "SELECT count(*) FROM edge_capture_gaps WHERE device_id = $1", dev.id))
