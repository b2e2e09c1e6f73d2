"""A worker killed in the middle of replay.

20,000 rows (then deletes and updates of them) are staged under review in ~100
batches. After approval, ``edgesync serve`` starts replaying them; the test holds a
row lock on one staged batch of the third replay chunk, so the worker is provably
mid-replay when it is SIGKILLed — two chunks committed, a third open. A fresh worker
resumes: the cloud equals SQLite, nothing doubled (live rows, tombstones, counters)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from kits.e2e_kit import (
    Device,
    app,
    cloud,
    eventually,
    lineage,
    register,
    sqlite_rows,
    state_rows,
    target_of,
    wait_lineage,
    wait_reviews,
    wait_rows,
)
from kits.review_helpers import claim_and_approve

from edgesync.agent import Agent, load_config
from edgesync.materialize import quote_ident

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(180)]

EDGESYNC = shutil.which("edgesync", path=str(Path(sys.executable).parent)) or "edgesync"
ROWS, PER_FLUSH = 20_000, 200
REPLAY_CHUNK = 20  # staged batches per replay transaction (ingest._replay._CHUNK)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def serve(workers: list[subprocess.Popen[bytes]], tmp_path: Path, database_url: str,
          mqtt_url: str) -> subprocess.Popen[bytes]:
    log = open(tmp_path / f"worker-{len(workers)}.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [EDGESYNC, "serve", "--database-url", database_url, "--mqtt-url", mqtt_url,
         "--api-port", "0", "--data-dir", str(tmp_path / "serve")],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "EDGESYNC_LOG_LEVEL": "INFO"})
    log.close()
    workers.append(proc)
    return proc


async def test_worker_killed_mid_replay_resumes(tmp_path: Path, database_url: str,
                                                mqtt_url: str, unique: str,
                                                pool: asyncpg.Pool,
                                                workers: list[subprocess.Popen[bytes]]
                                                ) -> None:
    # ---- stage everything under review (in-process worker), then stop that worker
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        assert server.pool is not None
        dev = await register(server.pool, tmp_path, mqtt_url, unique, tag="kill")
        app(dev.db, "CREATE TABLE log (id INTEGER PRIMARY KEY, v TEXT NOT NULL, n INTEGER)")
        sent = 0
        async with Agent(load_config(dev.config)) as agent:
            for lo in range(0, ROWS, PER_FLUSH):
                app(dev.db, ("INSERT INTO log VALUES (?, ?, ?)",
                             [(i, f"row {i}", i % 97) for i in range(lo, lo + PER_FLUSH)]))
                sent += await agent.flush()
            app(dev.db, "DELETE FROM log WHERE id % 10 = 0")
            sent += await agent.flush()
            app(dev.db, "UPDATE log SET v = v || ' updated', n = -n WHERE id % 7 = 0")
            sent += await agent.flush()
            (review,) = (await wait_reviews(server.pool, dev, {"log"})).values()
            await wait_lineage(server.pool, dev, "log", lambda r: r["staged_rows"] == sent,
                               f"{sent} rows staged", limit=60)
    staged = [r["id"] for r in await pool.fetch(
        "SELECT id FROM edge_staged_rows WHERE lineage_id = $1 ORDER BY id",
        review.lineage_id)]
    assert len(staged) > 3 * REPLAY_CHUNK

    # ---- approve with no worker running; hold one staged batch of the third chunk
    await claim_and_approve(pool, review, None)
    blocker = await pool.acquire()
    try:
        hold = blocker.transaction()
        await hold.start()
        await blocker.execute("SELECT 1 FROM edge_staged_rows WHERE id = $1 FOR UPDATE",
                              staged[2 * REPLAY_CHUNK + 5])
        first = serve(workers, tmp_path, database_url, mqtt_url)

        async def mid_replay() -> bool:
            done = await pool.fetchval(
                "SELECT rows_replayed FROM edge_replay_intents WHERE lineage_id = $1 "
                "AND status = 'pending'", review.lineage_id)
            waiting = await pool.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND query LIKE '%DELETE FROM edge_staged_rows%'")
            return bool(done and waiting)

        await eventually(mid_replay, limit=60, what="worker blocked mid-replay")
        first.send_signal(signal.SIGKILL)
        assert first.wait(timeout=30) == -signal.SIGKILL
        await hold.rollback()
    finally:
        await pool.release(blocker)

    rec = await lineage(pool, dev, "log")
    assert rec is not None and rec["staged_rows"] > 0, "killed before the replay ended"
    committed = await pool.fetchval(
        "SELECT rows_replayed FROM edge_replay_intents WHERE lineage_id = $1",
        review.lineage_id)
    assert 0 < committed < sent

    # ---- a fresh worker resumes the replay
    second = serve(workers, tmp_path, database_url, mqtt_url)
    rec = await wait_lineage(pool, dev, "log", lambda r: r["staged_rows"] == 0,
                             "replay resumed and drained", limit=90)
    await _check(pool, dev, review.lineage_id, sent)
    second.send_signal(signal.SIGTERM)
    assert second.wait(timeout=60) == 0


async def _check(pool: asyncpg.Pool, dev: Device, lineage_id: Any, sent: int) -> None:
    table = await target_of(pool, dev, "log")

    async def cloud_log() -> list[tuple[Any, ...]]:
        return await state_rows(pool, table, dev, ["id", "v", "n"], "id")

    await wait_rows(cloud_log, sqlite_rows(dev.db, "SELECT * FROM log ORDER BY id"),
                     "after the resumed replay")
    counts = await pool.fetchrow(
        f"SELECT count(*) AS total, count(*) FILTER (WHERE _edge_deleted) AS tombstones, "
        f"count(DISTINCT _edge_pk_hash) AS keys FROM {quote_ident(table)} WHERE device_id = $1",
        dev.id)
    assert tuple(counts) == (ROWS, ROWS // 10, ROWS), "rows or tombstones doubled"

    async def intent_done() -> Any:
        return await pool.fetchrow(
            "SELECT status, rows_replayed FROM edge_replay_intents WHERE lineage_id = $1",
            lineage_id)

    intent = await eventually(lambda: _done(intent_done), what="replay intent done")
    assert intent["rows_replayed"] == sent, "replayed rows counted twice or lost"
    rec = await lineage(pool, dev, "log")
    assert rec is not None
    assert (rec["status"], rec["materialized_rows"], rec["staged_bytes"],
            rec["materialization_errors"]) == ("active", sent, 0, 0)


async def _done(fetch: Any) -> Any:
    rec = await fetch()
    return rec if rec is not None and rec["status"] == "done" else None
