"""Re-snapshot on demand and verification end to end (real Mosquitto, PostgreSQL, agent
and server; docs/recovery.md).

* A 100,000-row table the agent never sent (no ``snapshot_on_first_run``) is
  re-snapshotted while the application keeps updating, deleting and inserting rows; the
  cloud (which also holds a row the device never had) ends equal to SQLite.
* A verification finds a row edited directly in PostgreSQL; ``repair`` re-snapshots
  exactly that row's bucket, and a second verification is equal.
"""

from __future__ import annotations

import asyncio
import random
import socket
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from kits.e2e_kit import (
    Device,
    app,
    approve,
    cloud,
    eventually,
    pool_of,
    register,
    running_agent,
    sqlite_rows,
    target_of,
    wait_equal,
    wait_lineage,
)

from edgesync import _core, control
from edgesync.agent.jobs import _resnapshot as resnapshot_module
from edgesync.materialize import quote_ident
from edgesync.protocol import pk_json

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

N = 100_000
COLS = ["id", "v", "n"]


async def _lineage_id(pool: asyncpg.Pool, dev: Device, table: str) -> uuid.UUID:
    rec = await wait_lineage(pool, dev, table, lambda r: r["status"] == "active", "active")
    return uuid.UUID(str(rec["id"]))


async def _job(pool: asyncpg.Pool, table: str, job_id: Any, status: str | tuple[str, ...],
               limit: float = 120) -> asyncpg.Record:
    wanted = (status,) if isinstance(status, str) else status

    async def probe() -> asyncpg.Record | None:
        rec = await pool.fetchrow(f"SELECT * FROM {table} WHERE id = $1", job_id)
        return rec if rec is not None and rec["status"] in wanted else None

    return await eventually(probe, limit, f"{table} {job_id} {wanted}")


async def _writer(db: Path, stop: asyncio.Event) -> int:
    """The application keeps writing: updates, deletes, re-inserts, new rows."""
    rnd, rounds, next_id = random.Random(7), 0, N + 1
    while not stop.is_set():
        ids = [rnd.randint(1, N) for _ in range(20)]
        await asyncio.to_thread(
            app, db, ("UPDATE big SET v = ?, n = n + 1 WHERE id = ?",
                      [(f"upd-{rounds}", i) for i in ids[:15]]),
            ("DELETE FROM big WHERE id = ?", [(i,) for i in ids[15:18]]),
            ("INSERT OR REPLACE INTO big VALUES (?, ?, ?)",
             [(ids[18], "back", 0), (next_id, "new", 1)]))
        rounds, next_id = rounds + 1, next_id + 1
        await asyncio.sleep(0.02)
    return rounds


@pytest.mark.once
async def test_resnapshot_of_100k_rows_under_concurrent_writes_ends_equal(
        tmp_path: Path, database_url: str, mqtt_url: str, unique: str) -> None:
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag="resnap")
        app(dev.db, "CREATE TABLE big (id INTEGER PRIMARY KEY, v TEXT, n INTEGER)",
            ("INSERT INTO big VALUES (?, ?, ?)",
             ((i, f"row-{i}", i % 977) for i in range(1, N + 1))))
        async with running_agent(dev):
            app(dev.db, "UPDATE big SET v = 'live' WHERE id = 1")  # the lineage's first row
            await approve(pool, dev, "big", limit=60)
            lineage_id = await _lineage_id(pool, dev, "big")
            target = await target_of(pool, dev, "big")
            await eventually(lambda: pool.fetchval(
                f"SELECT count(*) FROM {quote_ident(target)} WHERE device_id = $1", dev.id),
                60, "the live row materialized")
            # a row the device never had: the completed re-snapshot sweeps it
            stale = await pool.fetchrow(f"SELECT * FROM {quote_ident(target)} LIMIT 1")
            assert stale is not None
            await pool.execute(
                f"INSERT INTO {quote_ident(target)} (device_id, _edge_pk_hash, "
                "_edge_journal_epoch, _edge_commit_seq, id, v, n) VALUES ($1, $2, $3, 0, "
                "-5, 'ghost', 0)", dev.id, _core.pk_hash(pk_json(["id"], [-5])),
                stale["_edge_journal_epoch"])
            stop = asyncio.Event()
            writer = asyncio.create_task(_writer(dev.db, stop))
            try:
                async with pool.acquire() as conn, conn.transaction():
                    job = await control.request_resnapshot(conn, dev.scope.project_id,
                                                           lineage_id, actor="test")
                await _job(pool, "edge_resnapshots", job.id, "running", 60)
                done = await _job(pool, "edge_resnapshots", job.id,
                                  ("completed", "failed"), 180)
            finally:
                stop.set()
                rounds = await writer
            assert done["status"] == "completed", done["error"]
            assert done["rows_sent"] >= N - 3 * rounds and done["chunks"] >= 5
            assert done["swept_rows"] == 1
            await wait_equal(pool, dev, "big", COLS, limit=120)


@pytest.mark.once
async def test_resnapshot_resumes_after_a_restart_of_both_sides(
        tmp_path: Path, database_url: str, mqtt_url: str, unique: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resnapshot_module, "CHUNK_ROWS", 2000)
    monkeypatch.setattr(resnapshot_module, "MAX_OPEN", 1)
    n = 30_000
    with socket.socket() as sock:  # one API port for both runs of the server: the
        sock.bind(("127.0.0.1", 0))  # upload URLs granted before the restart name it
        port = sock.getsockname()[1]
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique,
                     api_port=port) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag="resume")
        app(dev.db, "CREATE TABLE big (id INTEGER PRIMARY KEY, v TEXT, n INTEGER)",
            ("INSERT INTO big VALUES (?, ?, ?)", ((i, f"row-{i}", i) for i in range(1, n + 1))))
        async with running_agent(dev):
            app(dev.db, "UPDATE big SET v = 'live' WHERE id = 1")
            await approve(pool, dev, "big", limit=60)
            lineage_id = await _lineage_id(pool, dev, "big")
            async with pool.acquire() as conn, conn.transaction():
                job = await control.request_resnapshot(conn, dev.scope.project_id, lineage_id)

            async def some_chunks() -> bool:
                rows = await pool.fetchval("SELECT rows_sent FROM edge_resnapshots "
                                           "WHERE id = $1", job.id)
                return bool(rows and rows >= 4000)

            await eventually(some_chunks, 60, "a few chunks sent")
    # both sides were stopped mid-way; both start again (same data, same state.db)
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique,
                     api_port=port) as server:
        pool = pool_of(server)
        running = await pool.fetchval("SELECT rows_sent FROM edge_resnapshots WHERE id = $1",
                                      job.id)
        assert 4000 <= running < n
        async with running_agent(dev):
            done = await _job(pool, "edge_resnapshots", job.id, ("completed", "failed"))
            assert (done["status"], done["rows_sent"], done["chunks"]) == ("completed", n, 15)
            await wait_equal(pool, dev, "big", COLS, limit=90)


async def test_verify_finds_a_row_edited_in_postgres_and_repair_fixes_its_bucket(
        tmp_path: Path, database_url: str, mqtt_url: str, unique: str) -> None:
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag="verify")
        app(dev.db, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT, x REAL, b BLOB, "
                    "m NUMERIC)")
        async with running_agent(dev):
            app(dev.db, ("INSERT INTO t VALUES (?, ?, ?, ?, ?)",
                         [(i, f"v{i}", i / 3, bytes([i % 256]), i * 1.5 if i % 2 else i)
                          for i in range(1, 3001)]))
            await approve(pool, dev, "t", limit=60)
            lineage_id = await _lineage_id(pool, dev, "t")
            await wait_equal(pool, dev, "t", ["id", "v", "x"], limit=60)

            async def verify(repair: bool) -> asyncpg.Record:
                async with pool.acquire() as conn, conn.transaction():
                    job = await control.request_verify(conn, dev.scope.project_id, lineage_id,
                                                       repair=repair, actor="test")
                return await _job(pool, "edge_verifications", job.id,
                                  ("equal", "different", "failed"), 90)

            first = await verify(False)
            assert (first["status"], first["device_rows"], first["cloud_rows"]) == (
                "equal", 3000, 3000), first["error"]
            target = await target_of(pool, dev, "t")
            await pool.execute(f"UPDATE {quote_ident(target)} SET v = 'tampered' "
                               "WHERE device_id = $1 AND id = 7", dev.id)
            bucket = _core.pk_hash(pk_json(["id"], [7]))[:2]
            second = await verify(True)
            assert second["status"] == "different"
            assert second["differing_buckets"] == [bucket]
            repair = await _job(pool, "edge_resnapshots", second["resnapshot_id"],
                                ("completed", "failed"), 90)
            in_bucket = sum(1 for (i,) in sqlite_rows(dev.db, "SELECT id FROM t")
                            if _core.pk_hash(pk_json(["id"], [i]))[:2] == bucket)
            assert (repair["status"], repair["rows_sent"]) == ("completed", in_bucket)
            assert repair["filter"] == {"buckets": {"prefix": 2, "values": [bucket]}}
            await wait_equal(pool, dev, "t", ["id", "v", "x"], limit=60)
            third = await verify(False)
            assert third["status"] == "equal", third
            events = await pool.fetch(
                "SELECT body FROM edge_events WHERE subject_id = $1 AND event_type = "
                "'edgesync.verification.finished.v1' ORDER BY id", lineage_id)
            assert [e["body"]["status"] for e in events] == ["equal", "different", "equal"]


