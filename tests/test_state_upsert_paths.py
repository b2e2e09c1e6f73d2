"""StateTarget writes a batch with MERGE (PostgreSQL 15+) or with INSERT … ON CONFLICT
(older servers); both give the same table for the same deliveries: repeated keys inside
a batch, batches out of order, redelivery, deletes that leave tombstones."""

from __future__ import annotations

import random
import uuid
from typing import Any

import asyncpg
import orjson
import pytest

from edgesync import _core
from edgesync.materialize import MirrorColumn, StateTarget, quote_ident
from edgesync.protocol import uuid7

COLUMNS = [MirrorColumn("id", "id", "bigint"), MirrorColumn("v", "v", "text")]


def batch(epoch: str, ops: list[tuple[int, str, int, str | None]]) -> bytes:
    rows = [{"commit_seq": seq, "op": op, "pk": {"id": key},
             "row": None if op == "delete" else {"id": key, "v": v}}
            for seq, op, key, v in ops]
    return orjson.dumps({
        "format_version": 1, "capture_strategy": "sqlite_row_batch_v1",
        "batch_id": uuid7(), "journal_epoch": epoch, "source_table": "t",
        "schema_hash": "0" * 64, "first_commit_seq": ops[0][0],
        "last_commit_seq": ops[-1][0], "rows": rows})


class OldServer:
    """A connection that says it is PostgreSQL 14 (no MERGE)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def get_server_version(self) -> Any:
        return type(self._conn.get_server_version())(14, 0, 0, "final", 0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_merge_and_on_conflict_agree(pool: asyncpg.Pool, unique: str, seed: int) -> None:
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
        assert conn.get_server_version().major >= 15, "this test needs MERGE on the server"
        for name, wrap in (("merge", lambda c: c), ("conflict", OldServer)):
            target = StateTarget(f"edge_state_paths_{name}_{unique}_{seed}", COLUMNS)
            async with conn.transaction():
                await target.provision(conn)
            for p in deliveries:
                decoded = _core.decode_row_batch(p)
                async with conn.transaction():
                    await target.apply(wrap(conn), device, decoded)
            rows = await conn.fetch(
                f"SELECT id, v, _edge_deleted, _edge_commit_seq FROM {quote_ident(target.table)} "
                "ORDER BY _edge_pk_hash")
            tables[name] = sorted(tuple(r) for r in rows)
    assert tables["merge"] == tables["conflict"]
    assert tables["merge"] == [(1, "a2", False, 3), (2, "b-again", False, 6),
                               (3, None, True, 8), (4, "d", False, 9)]
    assert not _core.decode_row_batch(payloads[0]).keys_are_unique
    assert _core.decode_row_batch(payloads[1]).keys_are_unique
