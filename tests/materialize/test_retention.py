"""Dropping old day partitions of a telemetry target (``drop_partitions_before``): only
the days before the one given, never DEFAULT, under the target's DDL lock (so it waits
for a transaction creating a partition, as the worker's would), names quoted."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, date, datetime, timedelta

import asyncpg

from edgesync.materialize import MirrorColumn, TsTarget, drop_partitions_before, quote_ident

DAY = datetime(2026, 12, 1, 12, tzinfo=UTC)


async def target_with_days(pool: asyncpg.Pool, days: int) -> TsTarget:
    """A target whose name needs quoting, a row on each of ``days`` days from ``DAY``."""
    target = TsTarget(f"edge_ts_Retention-{uuid.uuid4().hex[:8]}",
                      [MirrorColumn("v", "v", "double precision")])
    async with pool.acquire() as conn, conn.transaction():
        await target.provision(conn)
        last = DAY + timedelta(days=days - 1)
        await target.ensure_partitions(conn, DAY, last)
        await conn.executemany(
            f"INSERT INTO {quote_ident(target.table)} (device_id, event_ts, v) VALUES ($1, $2, 1)",
            [(uuid.uuid4(), DAY + timedelta(days=i)) for i in range(days)])
    return target


async def children(pool: asyncpg.Pool, table: str) -> list[str]:
    return [r["relname"] for r in await pool.fetch(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = $1::regclass ORDER BY 1", quote_ident(table))]


async def test_the_days_before_the_cutoff_go_and_their_rows_with_them(pool):
    target = await target_with_days(pool, 4)  # Dec 1-4, and the 5th created empty
    async with pool.acquire() as conn, conn.transaction():
        dropped = await drop_partitions_before(conn, target.table, date(2026, 12, 3))
    assert dropped == [f"{target.table}_d20261201", f"{target.table}_d20261202"]
    assert await children(pool, target.table) == sorted([
        f"{target.table}_d20261203", f"{target.table}_d20261204",
        f"{target.table}_d20261205", target.default_partition])
    days = await pool.fetch(f"SELECT event_ts FROM {quote_ident(target.table)} ORDER BY 1")
    assert [r["event_ts"].date() for r in days] == [date(2026, 12, 3), date(2026, 12, 4)]
    async with pool.acquire() as conn, conn.transaction():  # nothing left to drop
        assert await drop_partitions_before(conn, target.table, date(2026, 12, 3)) == []


async def test_a_row_of_a_dropped_day_goes_to_default(pool):
    """A worker that still believes in the partition writes a late row: not refused."""
    target = await target_with_days(pool, 2)
    async with pool.acquire() as conn, conn.transaction():
        await drop_partitions_before(conn, target.table, date(2026, 12, 2))
    await pool.execute(f"INSERT INTO {quote_ident(target.table)} (device_id, event_ts, v) "
                       "VALUES ($1, $2, 2)", uuid.uuid4(), DAY)
    assert await pool.fetchval(
        f"SELECT count(*) FROM {quote_ident(target.default_partition)}") == 1


async def test_dropping_waits_for_a_transaction_creating_a_partition(pool):
    """The worker's ``ensure_partitions`` holds the DDL lock while it creates a day: the
    drop waits for its commit, then sees (and keeps) the new day."""
    target = await target_with_days(pool, 1)
    later = DAY + timedelta(days=10)
    async with pool.acquire() as creating, pool.acquire() as dropping:
        tx = creating.transaction()
        await tx.start()
        assert await target.ensure_partitions(creating, later, later) == 2
        async with dropping.transaction():
            task = asyncio.ensure_future(
                drop_partitions_before(dropping, target.table, date(2026, 12, 20)))
            pid = dropping.get_server_pid()
            for _ in range(500):
                if await pool.fetchval("SELECT wait_event_type = 'Lock' FROM pg_stat_activity "
                                       "WHERE pid = $1", pid):
                    break
                await asyncio.sleep(0.01)
            assert not task.done(), "the drop did not wait for the DDL lock"
            await tx.commit()
            dropped = await task
    assert dropped == [f"{target.table}_d20261201", f"{target.table}_d20261202",
                       f"{target.table}_d20261211", f"{target.table}_d20261212"]
    assert await children(pool, target.table) == [target.default_partition]
