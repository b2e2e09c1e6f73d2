"""Two transactions creating or altering the same target object, held at a barrier right
before the DDL: the second waits on the table's DDL lock while the first has done its
DDL uncommitted, then goes on once the first committed. It must see the committed
object (no "already exists", no catalog unique violation) or refuse a conflicting one.

Issue 25: the loser checked with ``to_regclass`` after the lock, which answers from the
backend's cache where its own earlier miss was still remembered, and its CREATE TABLE
failed with DuplicateTableError; the batch was dropped.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import orjson
import pytest

from edgesync import _core
from edgesync.errors import ConflictError
from edgesync.governance._bindings import provision_target
from edgesync.materialize import MirrorColumn, StateTarget, TsTarget, quote_ident
from edgesync.materialize._ts_target import TsRows
from edgesync.protocol import uuid7

DAY = datetime(2026, 12, 5, 9, tzinfo=UTC)


async def race(pool: asyncpg.Pool, a: asyncpg.Connection, b: asyncpg.Connection,
               first: Awaitable[Any], second: Awaitable[Any]) -> Any:
    """``first`` on ``a`` (its DDL done, not committed), then ``second`` on ``b`` until it
    waits on a lock (held right before its own DDL), then ``a`` commits; returns what
    ``second`` returned (or raises what it raised), then commits ``b``."""
    await first
    task = asyncio.ensure_future(second)
    pid = b.get_server_pid()
    for _ in range(500):
        if task.done() or await pool.fetchval(
                "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1", pid):
            break
        await asyncio.sleep(0.01)
    assert not task.done(), "the second transaction did not wait for the first"
    await a.execute("COMMIT")
    try:
        result = await task
    except BaseException:
        await b.execute("ROLLBACK")
        raise
    await b.execute("COMMIT")
    return result


@asynccontextmanager
async def bare(pool: asyncpg.Pool
               ) -> AsyncIterator[tuple[asyncpg.Connection, asyncpg.Connection]]:
    """Two connections; each ``BEGIN`` is the test's (``race`` ends them)."""
    async with pool.acquire() as a, pool.acquire() as b:
        await a.execute("BEGIN")
        await b.execute("BEGIN")
        try:
            yield a, b
        finally:
            for c in (a, b):
                if c.is_in_transaction():
                    await c.execute("ROLLBACK")


def table_name(kind: str) -> str:
    return f"edge_race_{kind}_{uuid.uuid4().hex[:10]}"


MIRRORS = [MirrorColumn("v", "v", "double precision")]


async def new_ts_table(pool: asyncpg.Pool) -> TsTarget:
    target = TsTarget(table_name("ts"), MIRRORS)
    async with pool.acquire() as conn, conn.transaction():
        await target.provision(conn)
    return target


async def partitions(pool: asyncpg.Pool, table: str) -> list[str]:
    return [r["relname"] for r in await pool.fetch(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = $1::regclass ORDER BY 1", table)]


async def test_a_day_partition_created_meanwhile_is_seen_under_the_lock(pool):
    """Live ingest (either lane), replay, re-snapshot and other workers all come here."""
    target = await new_ts_table(pool)
    async with bare(pool) as (a, b):
        created = await race(pool, a, b, target.ensure_partitions(a, DAY, DAY),
                             target.ensure_partitions(b, DAY, DAY))
    assert created == 0
    assert len(await partitions(pool, target.table)) == 3  # DEFAULT, the day, the next day


async def test_a_day_moved_out_of_default_meanwhile_is_seen_under_the_lock(pool):
    """The slower path: rows of the day sit in DEFAULT already (a batch spanning too many
    days put them there), so the first transaction moves them and attaches the table."""
    target = await new_ts_table(pool)
    q = quote_ident(target.table)
    await pool.execute(f"INSERT INTO {q} (device_id, event_ts, v) VALUES ($1, $2, 1.5)",
                       uuid.uuid4(), DAY)
    async with bare(pool) as (a, b):
        created = await race(pool, a, b, target.ensure_partitions(a, DAY, DAY),
                             target.ensure_partitions(b, DAY, DAY))
    assert created == 0
    assert await pool.fetchval(f"SELECT count(*) FROM {q}") == 1
    assert await pool.fetchval(
        f"SELECT count(*) FROM {quote_ident(target.default_partition)}") == 0


def telemetry(n: int, at: datetime) -> _core.TelemetryBatch:
    stamps = [(at + timedelta(seconds=i)).isoformat() for i in range(n)]
    return _core.decode_telemetry_batch(orjson.dumps({
        "format_version": 1, "capture_strategy": "sqlite_telemetry_batch_v1",
        "batch_id": uuid7(), "batch_seq": 1, "source_table": "meter", "schema_hash": "0" * 64,
        "cursor_start_ts": stamps[0], "cursor_end_ts": stamps[-1], "row_count": n,
        "rows": [{"ts": ts, "fields": {"v": float(i)}} for i, ts in enumerate(stamps)]}))


async def test_a_live_group_and_a_replay_both_write_their_rows_to_a_new_day(pool):
    """The issue's race itself: a live group and a replay chunk write the first rows of
    a day into one coalesced target, both needing its partition."""
    target = await new_ts_table(pool)
    day = DAY + timedelta(days=3)
    live: list[TsRows] = [target.encode(uuid.uuid4(), telemetry(50, day))]
    replay: list[TsRows] = [target.encode(uuid.uuid4(), telemetry(50, day))]
    async with bare(pool) as (a, b):
        await race(pool, a, b, target.write_group(a, live), target.write_group(b, replay))
    q = quote_ident(target.table)
    assert await pool.fetchval(f"SELECT count(*) FROM {q}") == 100
    assert await pool.fetchval(
        f"SELECT count(*) FROM {quote_ident(target.default_partition)}") == 0


@pytest.mark.parametrize("pipeline", ["rows", "telemetry"])
async def test_two_approvals_create_one_coalesced_target(pool, pipeline):
    """Two devices' approvals of one coalesced target at once: the second finds the
    table the first created (before: a unique violation in pg_type for state tables)."""
    table = table_name(pipeline)
    async with bare(pool) as (a, b):
        await race(pool, a, b, provision_target(a, pipeline, table, MIRRORS),
                   provision_target(b, pipeline, table, MIRRORS))
    cols = await pool.fetch("SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass "
                            "AND attname = 'v'", table)
    assert len(cols) == 1


async def test_two_approvals_add_their_own_new_columns(pool):
    table = table_name("rows")
    async with pool.acquire() as conn, conn.transaction():
        await provision_target(conn, "rows", table, MIRRORS)
    first = [*MIRRORS, MirrorColumn("a", "a", "bigint")]
    second = [*MIRRORS, MirrorColumn("b", "b", "text")]
    async with bare(pool) as (a, b):
        await race(pool, a, b, provision_target(a, "rows", table, first),
                   provision_target(b, "rows", table, second))
    types = dict(await pool.fetch(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = $1::regclass AND attname IN ('a', 'b')", table))
    assert types == {"a": "bigint", "b": "text"}


async def test_a_column_added_meanwhile_with_another_type_is_refused(pool):
    """Before, the second approval's ``ADD COLUMN IF NOT EXISTS`` skipped the column the
    first had just added as bigint, and its text values went to a bigint column."""
    table = table_name("rows")
    async with pool.acquire() as conn, conn.transaction():
        await provision_target(conn, "rows", table, MIRRORS)
    async with bare(pool) as (a, b):
        with pytest.raises(ConflictError, match="already exists as bigint, not text"):
            await race(pool, a, b,
                       provision_target(a, "rows", table, [MirrorColumn("x", "x", "bigint")]),
                       provision_target(b, "rows", table, [MirrorColumn("x", "x", "text")]))


async def test_two_switches_to_cloud_authority_add_its_columns_once(pool):
    table = table_name("rows")
    async with pool.acquire() as conn, conn.transaction():
        await provision_target(conn, "rows", table, MIRRORS)
    target = StateTarget(table, [])
    async with bare(pool) as (a, b):
        await race(pool, a, b, target.provision_cloud_authority(a),
                   target.provision_cloud_authority(b))
    assert await pool.fetchval(
        "SELECT count(*) FROM pg_attribute WHERE attrelid = $1::regclass "
        "AND attname IN ('_edge_cloud_version', '_edge_lkcv')", table) == 2


async def test_staging_tables_are_per_connection(pool):
    """The group writer's staging tables are temporary: two connections create the same
    layout side by side, with no lock and nothing to race on."""
    layout = "(_edge_device uuid, v double precision)"
    async with bare(pool) as (a, b):
        for conn in (a, b):
            await conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS _edge_in_race {layout} "
                               "ON COMMIT DROP")
        await a.execute("COMMIT")
        await b.execute("COMMIT")
