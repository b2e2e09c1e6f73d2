"""Per-row quarantine end to end (real agent, Mosquitto, PostgreSQL).

SQLite turns an INTEGER past 2^63-1 into a REAL (9.223372036854776e18): the cloud's
encoder refuses it for the bigint column. That row is quarantined while the rest of its
batch and every later batch of the table flow on (no pause, no breaker); the operator
edits and retries it; the device's own fix later supersedes nothing and the cloud ends
equal to SQLite.

Then a lineage-wide failure (the target table gone: renamed away by hand) does trip the
breaker, with an overflowing row among the staged batches; after the real fix (the
table back) a reset drains everything, the overflowing row is quarantined on replay,
and the breaker does not trip again."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from control_kit import device_paused, device_resumed
from kits.e2e_kit import (
    Device,
    Row,
    app,
    approve,
    cloud,
    eventually,
    lineage,
    pool_of,
    register,
    running_agent,
    sqlite_table,
    state_rows,
    target_of,
    wait_equal,
    wait_lineage,
    wait_rows,
)

from edgesync import quarantine
from edgesync.control import reset_materialization
from edgesync.governance import get_lineage_for_update
from edgesync.materialize import quote_ident
from edgesync.staging import requeue_failed

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]

COLS = ["id", "v", "n"]
# 2^63 written as a literal: SQLite stores it as REAL 9.223372036854776e18 (Python's
# sqlite3 would refuse the int itself).
TOO_BIG = "9223372036854775808"


async def open_rows(pool: asyncpg.Pool, lineage_id: object) -> list[asyncpg.Record]:
    return await pool.fetch("SELECT * FROM edge_quarantined_rows WHERE lineage_id = $1 "
                            "AND status = 'open' ORDER BY id", lineage_id)


async def wait_equal_but(pool: asyncpg.Pool, dev: Device, table: str, skip: set[int]
                         ) -> list[Row]:
    """The cloud equals SQLite on every row but those of ids ``skip``."""
    target = await target_of(pool, dev, table)

    async def cloud_rows() -> list[Row]:
        return [r for r in await state_rows(pool, target, dev, COLS) if r[0] not in skip]

    return await wait_rows(cloud_rows, lambda: [r for r in sqlite_table(dev.db, table, COLS)
                                                if r[0] not in skip],
                           f"{table}: cloud equals SQLite but {sorted(skip)}", 40)


@contextlib.asynccontextmanager
async def live_table(tmp_path: Path, database_url: str, mqtt_url: str, unique: str, tag: str
                     ) -> AsyncIterator[tuple[asyncpg.Pool, Device]]:
    """The cloud, a device with a running agent, table t approved and equal in the cloud."""
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag=tag)
        app(dev.db, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT, n INTEGER)")
        async with running_agent(dev):
            app(dev.db, ("INSERT INTO t VALUES (?, ?, ?)", [(i, f"v{i}", i) for i in range(1, 11)]))
            await approve(pool, dev, "t")
            await wait_equal(pool, dev, "t", COLS)
            yield pool, dev


async def test_an_overflowing_integer_is_quarantined_while_the_table_flows(
        tmp_path: Path, database_url: str, mqtt_url: str, unique: str) -> None:
    async with live_table(tmp_path, database_url, mqtt_url, unique, "qrn") as (pool, dev):
        # One poisoned row among good ones, in the same transaction (one batch).
        app(dev.db, "BEGIN", f"INSERT INTO t VALUES (100, 'big', {TOO_BIG})",
            ("INSERT INTO t VALUES (?, ?, ?)", [(i, f"v{i}", i) for i in range(101, 111)]),
            "COMMIT")
        assert app_value(dev.db, 100) == 9.223372036854776e18
        rec = await lineage(pool, dev, "t")
        assert rec is not None
        await eventually(lambda: has_open(pool, rec["id"], 1), what="row quarantined")
        await wait_equal_but(pool, dev, "t", {100})
        (q,) = await open_rows(pool, rec["id"])
        assert (q["reason_code"], q["reason_field"]) == ("value_type_mismatch",
                                                          "rows[0].row.n")
        assert '"n":9.223372036854776e+18' in q["row_json"] and q["op"] == "insert"

        # The table keeps flowing: later batches, the lineage never paused.
        app(dev.db, ("INSERT INTO t VALUES (?, ?, ?)",
                     [(i, f"later{i}", i) for i in range(200, 230)]),
            "UPDATE t SET v = 'edited' WHERE id < 5")
        await wait_equal_but(pool, dev, "t", {100})
        rec = await lineage(pool, dev, "t")
        assert rec is not None
        assert (rec["status"], rec["materialization_errors"], rec["staged_rows"]) == (
            "active", 0, 0)

        # The operator edits the value and retries: written through the writer.
        async with pool.acquire() as conn, conn.transaction():
            locked = await get_lineage_for_update(conn, rec["id"])
            assert locked is not None
            out = await quarantine.retry_row(conn, locked, q["id"], actor="op",
                                             values={"n": 9223372036854775807})
        assert out.written
        target = await target_of(pool, dev, "t")
        assert await pool.fetchval(f"SELECT n FROM {quote_ident(target)} WHERE id = 100 "
                                   "AND device_id = $1", dev.id) == 9223372036854775807
        assert await open_rows(pool, rec["id"]) == []

        # The device's own fix is a newer change: the cloud ends equal to SQLite.
        app(dev.db, "UPDATE t SET n = 7 WHERE id = 100")
        await wait_equal(pool, dev, "t", COLS)
        rec = await lineage(pool, dev, "t")
        assert rec is not None and rec["materialization_errors"] == 0


async def test_reset_after_a_real_fix_drains_everything_with_no_retrip(
        tmp_path: Path, database_url: str, mqtt_url: str, unique: str) -> None:
    async with live_table(tmp_path, database_url, mqtt_url, unique, "qrs") as (pool, dev):
        target = await target_of(pool, dev, "t")
        # A lineage-wide failure: the target is gone (renamed away by hand).
        await pool.execute(f"ALTER TABLE {quote_ident(target)} RENAME TO "
                           f"{quote_ident(target[:50] + '_away')}")
        for k in range(5):  # five failing batches, one with an overflowing row
            app(dev.db, "BEGIN",
                f"INSERT INTO t VALUES ({100 + k}, 'x', {TOO_BIG if k == 2 else k})",
                f"INSERT INTO t VALUES ({150 + k}, 'y', {k})", "COMMIT")
            await wait_lineage(pool, dev, "t",
                               lambda r, k=k: r["materialization_errors"] >= k + 1,
                               f"failure {k + 1} counted")
        rec = await wait_lineage(pool, dev, "t", lambda r: r["status"] == "paused",
                                 "breaker open")
        assert rec["pause_reason"] == "circuit_breaker"
        await eventually(lambda: device_paused(dev.state_db, "t"), what="device paused")

        # The real fix, then reset: everything drains, the overflowing row is
        # quarantined on replay, and the breaker stays closed.
        await pool.execute(f"ALTER TABLE {quote_ident(target[:50] + '_away')} RENAME TO "
                           f"{quote_ident(target)}")
        async with pool.acquire() as conn, conn.transaction():
            await reset_materialization(conn, rec["id"])
            requeued = await requeue_failed(conn, rec["id"])
        assert requeued >= 5
        await eventually(lambda: device_resumed(dev.state_db, "t"), what="device resumed")
        app(dev.db, ("INSERT INTO t VALUES (?, ?, ?)",
                     [(i, f"after{i}", i) for i in range(300, 320)]))
        await wait_equal_but(pool, dev, "t", {102})
        (q,) = await open_rows(pool, rec["id"])
        assert q["reason_code"] == "value_type_mismatch" and '"id":102' in q["row_json"]
        rec = await lineage(pool, dev, "t")
        assert rec is not None
        assert (rec["status"], rec["materialization_errors"], rec["staged_rows"]) == (
            "active", 0, 0)
        trips = await pool.fetchval(
            "SELECT count(*) FROM edge_events WHERE subject_id = $1 AND event_type = "
            "'integration.edge_table_lineage.ingestion_paused.v1' "
            "AND body->>'reason' = 'circuit_breaker'", rec["id"])
        assert trips == 1


def app_value(db: Path, key: int) -> object:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT n FROM t WHERE id = ?", (key,)).fetchone()[0]


async def has_open(pool: asyncpg.Pool, lineage_id: object, n: int) -> bool:
    return len(await open_rows(pool, lineage_id)) == n
