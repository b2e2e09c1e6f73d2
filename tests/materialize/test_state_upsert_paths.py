"""StateTarget's ways to write give the same table for the same deliveries (repeated keys
inside a batch, batches out of order, redelivery, deletes that leave tombstones): one
batch per transaction, whose staged rows go at commit; one group of every batch in one
COPY and one upsert; and several groups in one transaction, each emptying the staging
table the one before it left filled."""

from __future__ import annotations

import random
import uuid

import asyncpg
import orjson
import pytest

from edgesync import _core
from edgesync.materialize import MirrorColumn, StateTarget, quote_ident
from edgesync.protocol import uuid7

COLUMNS = [MirrorColumn("id", "id", "bigint"), MirrorColumn("v", "v", "text")]


async def staged_left(conn: asyncpg.Connection) -> int:
    """Rows in this connection's kept staging tables (``_edge_in_*``)."""
    names = await conn.fetch(
        "SELECT relname FROM pg_class WHERE relnamespace = pg_my_temp_schema() "
        "AND relkind = 'r' AND relname LIKE '\\_edge\\_in\\_%'")
    assert names, "the kept staging table exists"
    return sum([await conn.fetchval(f"SELECT count(*) FROM pg_temp.{quote_ident(r[0])}")
                for r in names])


def batch(epoch: str, ops: list[tuple[int, str, int, str | None]]) -> bytes:
    rows = [{"commit_seq": seq, "op": op, "pk": {"id": key},
             "row": None if op == "delete" else {"id": key, "v": v}}
            for seq, op, key, v in ops]
    return orjson.dumps({
        "format_version": 1, "capture_strategy": "sqlite_row_batch_v1",
        "batch_id": uuid7(), "journal_epoch": epoch, "source_table": "t",
        "schema_hash": "0" * 64, "first_commit_seq": ops[0][0],
        "last_commit_seq": ops[-1][0], "rows": rows})


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_live_and_replay_paths_agree(pool: asyncpg.Pool, unique: str, seed: int) -> None:
    epoch = uuid7()
    payloads = [
        batch(epoch, [(1, "insert", 1, "a"), (2, "insert", 2, "b"), (3, "update", 1, "a2")]),
        batch(epoch, [(4, "delete", 2, None), (5, "insert", 3, "c")]),
        batch(epoch, [(6, "insert", 2, "b-again"), (7, "update", 3, "c2"),
                      (8, "delete", 3, None), (9, "insert", 4, "d")]),
    ]
    deliveries = payloads * 2
    random.Random(seed).shuffle(deliveries)
    device = uuid.uuid4()
    tables = {}
    async with pool.acquire() as conn:
        for name in ("single", "group", "groups"):
            target = StateTarget(f"edge_state_paths_{name}_{unique}_{seed}", COLUMNS)
            async with conn.transaction():
                await target.provision(conn)
            decoded = [_core.decode_row_batch(p) for p in deliveries]
            parts = [(b, target.encode(device, b)) for b in decoded]
            if name == "single":
                for b in decoded:
                    async with conn.transaction():
                        await target.apply(conn, device, b)
                    assert await staged_left(conn) == 0  # gone at commit
            elif name == "group":
                async with conn.transaction():
                    await target.write_group(conn, parts, set())
                assert await staged_left(conn) == 0
            else:
                used: set[str] = set()
                async with conn.transaction():
                    for part in parts:
                        await target.write_group(conn, [part], used)
                        # Only this group's rows: the one before was emptied first.
                        assert await staged_left(conn) == part[0].row_count
                assert await staged_left(conn) == 0
            rows = await conn.fetch(
                f"SELECT id, v, _edge_deleted, _edge_commit_seq FROM {quote_ident(target.table)} "
                "ORDER BY _edge_pk_hash")
            tables[name] = sorted(tuple(r) for r in rows)
    assert tables["single"] == tables["group"] == tables["groups"]
    assert tables["single"] == [(1, "a2", False, 3), (2, "b-again", False, 6),
                              (3, None, True, 8), (4, "d", False, 9)]
    assert not _core.decode_row_batch(payloads[0]).keys_are_unique
    assert _core.decode_row_batch(payloads[1]).keys_are_unique


def test_a_layout_sends_one_upsert_text_whatever_the_binding_order() -> None:
    """Bindings are read in the order of their UUIDs, a random one per lineage: the
    upsert of each group must not depend on it, or PostgreSQL parses and plans a new
    statement for every group (pg_stat_statements showed one text per group)."""
    columns = [MirrorColumn(f"c{i}", f"c{i}", "bigint") for i in range(10)]
    texts = set()
    for seed in range(5):
        shuffled = columns[:]
        random.Random(seed).shuffle(shuffled)
        texts.add(StateTarget("t", shuffled)._upsert_sql("_edge_in_x", "n._edge_device"))
    assert len(texts) == 1


def test_lineages_of_one_table_and_columns_share_one_shape_whatever_the_binding_order(
) -> None:
    """A StateTarget is built for each lineage of each group; what follows from its
    columns (staging layout, COPY columns, statements, the telemetry target) is worked
    out once and shared. The telemetry target is what ``write_batches`` groups COPYs
    by: lineages whose bindings came in another order must still share one."""
    columns = [MirrorColumn(f"c{i}", f"c{i}", "bigint", "bigint") for i in range(10)]
    targets = []
    for seed in range(5):
        shuffled = columns[:]
        random.Random(seed).shuffle(shuffled)
        targets.append(StateTarget("t_shape", shuffled))
    assert len({id(t.telemetry) for t in targets}) == 1
    assert len({t.layout for t in targets}) == 1
    assert [c for c, _ in targets[0]._copy_columns()] == sorted(f"c{i}" for i in range(10))
    # Another table, or other columns: another shape.
    assert StateTarget("t_other", columns).telemetry is not targets[0].telemetry
    assert StateTarget("t_shape", columns[:9]).telemetry is not targets[0].telemetry


async def test_the_key_hash_compares_bytes_and_older_tables_are_written_alike(
        pool: asyncpg.Pool, unique: str) -> None:
    """A new target's ``_edge_pk_hash`` is COLLATE "C" (its primary key compares bytes);
    a target made before that, in the database's collation, takes the same groups, and
    the two tables end equal."""
    epoch, device = uuid7(), uuid.uuid4()
    decoded = [_core.decode_row_batch(p) for p in (
        batch(epoch, [(1, "insert", 1, "a"), (2, "insert", 2, "b")]),
        batch(epoch, [(3, "update", 1, "a2"), (4, "delete", 2, None)]))]
    new = StateTarget(f"edge_state_coll_new_{unique}", COLUMNS)
    old = StateTarget(f"edge_state_coll_old_{unique}", COLUMNS)
    async with pool.acquire() as conn:
        async with conn.transaction():
            await new.provision(conn)
            await old.provision(conn)
            await conn.execute(f"ALTER TABLE {quote_ident(old.table)} ALTER COLUMN "
                               "_edge_pk_hash TYPE text COLLATE \"default\"")
        collations = {t.table: await conn.fetchval(
            "SELECT collname FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation "
            "WHERE a.attrelid = $1::regclass AND a.attname = '_edge_pk_hash'",
            quote_ident(t.table)) for t in (new, old)}
        assert collations == {new.table: "C", old.table: "default"}
        for target in (new, old):
            for b in decoded:
                async with conn.transaction():
                    await target.write_group(conn, [(b, target.encode(device, b))], set())
        rows = [await conn.fetch(
            f"SELECT _edge_pk_hash, _edge_deleted, id, v FROM {quote_ident(t.table)} "
            "ORDER BY 1") for t in (new, old)]
    assert [tuple(r) for r in rows[0]] == [tuple(r) for r in rows[1]]
    assert len(rows[0]) == 2 and sum(r["_edge_deleted"] for r in rows[0]) == 1
