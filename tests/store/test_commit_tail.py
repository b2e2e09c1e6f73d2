"""``store.committing``: deferred statements travel with the COMMIT, in one round trip,
and an error of theirs rolls the whole transaction back."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import pytest

from edgesync.store import any_of, array_literal, committing


async def _table(conn: Any, unique: str) -> str:
    name = f"tail_{unique}"
    await conn.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, v text)")
    return name


async def test_deferred_statements_and_the_commit_are_one_round_trip(pool, unique):
    async with pool.acquire() as conn:
        table = await _table(conn, unique)
        sent: list[str] = []

        def log(record: Any) -> None:
            sent.append(record.query)

        conn.add_query_logger(log)
        try:
            async with committing(conn) as tail:
                await conn.execute(f"INSERT INTO {table} VALUES (1, 'now')")
                tail.defer(f"INSERT INTO {table} VALUES (2, 'deferred')")
                tail.defer(f"UPDATE {table} SET v = 'later' WHERE id = 1")
                assert len(tail) == 2
        finally:
            await asyncio.sleep(0)  # (loggers are called soon after each query)
            conn.remove_query_logger(log)
        assert len(sent) == 3  # BEGIN, the insert, then the tail with COMMIT
        assert sent[0] == "BEGIN"
        assert sent[-1].endswith("COMMIT") and "deferred" in sent[-1]
        assert not conn.is_in_transaction()
        rows = await conn.fetch(f"SELECT id, v FROM {table} ORDER BY id")
    assert [tuple(r) for r in rows] == [(1, "later"), (2, "deferred")]


async def test_an_error_of_a_deferred_statement_rolls_everything_back(pool, unique):
    async with pool.acquire() as conn:
        table = await _table(conn, unique)
        with pytest.raises(asyncpg.UniqueViolationError):
            async with committing(conn) as tail:
                await conn.execute(f"INSERT INTO {table} VALUES (1, 'now')")
                tail.defer(f"INSERT INTO {table} VALUES (1, 'again')")
        assert not conn.is_in_transaction()
        assert await conn.fetchval(f"SELECT count(*) FROM {table}") == 0
        # The connection is usable again.
        assert await conn.fetchval("SELECT 1") == 1


async def test_an_error_in_the_block_rolls_back_and_keeps_the_error(pool, unique):
    async with pool.acquire() as conn:
        table = await _table(conn, unique)
        with pytest.raises(LookupError):
            async with committing(conn) as tail:
                await conn.execute(f"INSERT INTO {table} VALUES (1, 'now')")
                tail.defer(f"INSERT INTO {table} VALUES (2, 'never')")
                raise LookupError("the caller's own")
        assert not conn.is_in_transaction()
        assert await conn.fetchval(f"SELECT count(*) FROM {table}") == 0


async def test_flush_runs_the_deferred_statements_before_a_later_one(pool, unique):
    async with pool.acquire() as conn:
        table = await _table(conn, unique)
        async with committing(conn) as tail:
            tail.defer(f"INSERT INTO {table} VALUES (1, 'a')")
            await tail.flush(conn)
            assert len(tail) == 0
            assert await conn.fetchval(f"SELECT v FROM {table} WHERE id = 1") == "a"
        assert await conn.fetchval(f"SELECT count(*) FROM {table}") == 1


async def test_array_literals_hold_ids_and_counts_only(pool):
    ids = [uuid.uuid4(), uuid.uuid4()]
    lit = array_literal(ids, "uuid")
    async with pool.acquire() as conn:
        assert await conn.fetchval(f"SELECT {lit}") == ids
        assert await conn.fetchval(f"SELECT {array_literal([3, -4], 'bigint')}") == [3, -4]
        assert await conn.fetchval(f"SELECT {array_literal([], 'int')}") == []
        assert await conn.fetchval(f"SELECT $1::uuid = {any_of(lit)}", ids[1]) is True
    with pytest.raises(TypeError, match="not a UUID"):
        array_literal(["00000000-0000-0000-0000-000000000000'); DROP TABLE x; --"],  # type: ignore[arg-type]
                      "uuid")
    with pytest.raises(TypeError, match="not an integer"):
        array_literal(["1}'::int[]; DROP TABLE x; --"], "bigint")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not an integer"):
        array_literal([True], "int")


async def test_a_prelude_travels_with_the_begin_and_ensure_skips_it(pool, unique):
    create = f"CREATE TEMP TABLE IF NOT EXISTS pre_{unique} (id int) ON COMMIT DELETE ROWS"
    other = f"CREATE TEMP TABLE IF NOT EXISTS pre2_{unique} (id int) ON COMMIT DELETE ROWS"
    async with pool.acquire() as conn:
        sent: list[str] = []

        def log(record: Any) -> None:
            sent.append(record.query)

        conn.add_query_logger(log)
        try:
            async with committing(conn, [create]) as tail:
                await tail.ensure(conn, create)  # carried by the BEGIN: not sent again
                await tail.ensure(conn, other)  # sent now
                await conn.execute(f"INSERT INTO pre_{unique} VALUES (1)")
                await conn.execute(f"INSERT INTO pre2_{unique} VALUES (1)")
        finally:
            await asyncio.sleep(0)
            conn.remove_query_logger(log)
        assert tail.ensured == [create, other]
        assert sent[0] == f"BEGIN;\n{create}"
        assert sent.count(other) == 1 and sent.count(create) == 0


async def test_a_failing_prelude_leaves_no_transaction_open(pool, unique):
    async with pool.acquire() as conn:
        with pytest.raises(asyncpg.UndefinedTableError):
            async with committing(conn, [f"INSERT INTO missing_{unique} VALUES (1)"]):
                raise AssertionError("not reached")
        assert not conn.is_in_transaction()
        assert await conn.fetchval("SELECT 1") == 1
