"""A progress round read from a ledger that is behind (a backlog after an outage): the
database groups its rows into controls, so the worker's event loop and heap carry one
row per control, not one per batch."""

from __future__ import annotations

import tracemalloc
import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg
import orjson

from edgesync import fleet
from edgesync.control import ProgressReporter


class Sink:
    """A publisher keeping what it was given for one project's devices, as published (the
    reporter reads every ledger row: other tests write theirs into the same database)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.raw: list[tuple[str, bytes]] = []

    async def publish_all(self, messages: Sequence[tuple[str, bytes]]) -> None:
        self.raw += [(t, p) for t, p in messages if t.startswith(self.root)]

    @property
    def sent(self) -> list[tuple[str, dict[str, Any]]]:
        return [(t, orjson.loads(p)) for t, p in self.raw]


class Counter:
    """A publisher keeping only how many batches each control of one project's devices
    confirmed."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.confirmed: list[int] = []

    async def publish_all(self, messages: Sequence[tuple[str, bytes]]) -> None:
        self.confirmed += [len(orjson.loads(p)["committed"]) for t, p in messages
                           if t.startswith(self.root)]


async def _devices(pool: asyncpg.Pool, unique: str, n: int) -> list[fleet.DeviceScope]:
    async with pool.acquire() as conn:
        return [await fleet.add_device(conn, project=f"pr-{unique}", name=f"gw-{i}",
                                       topic_slug=f"pr-{unique}") for i in range(n)]


async def _telemetry_rows(conn: asyncpg.Connection, device_ids: list[uuid.UUID],
                          seqs: range) -> None:
    """Ledger rows of telemetry batches, interleaved as a fleet's backlog arrives."""
    await conn.execute(
        "INSERT INTO edge_export_segments (device_id, batch_id, topic_kind, source_table, "
        "outcome, batch_seq) SELECT d, gen_random_uuid(), 'sync/telemetry/batch', 'tele', "
        "'materialized', g FROM generate_series($2::int, $3::int) g, unnest($1::uuid[]) d "
        "ORDER BY g", device_ids, seqs.start, seqs.stop - 1)


async def test_a_round_splits_a_device_into_controls_of_256_in_the_order_seen(
        pool: asyncpg.Pool, unique: str) -> None:
    (scope,) = await _devices(pool, unique, 1)
    sink = Sink(f"pr-{unique}/")
    reporter = ProgressReporter(pool, sink, interval=0.01)
    await reporter.report()  # start from "now"
    epoch = uuid.uuid4()
    async with pool.acquire() as conn:
        await _telemetry_rows(conn, [scope.device_id], range(1, 601))
        for first, outcome in ((1, "materialized"), (3, "rejected"), (5, "staged")):
            await conn.execute(
                "INSERT INTO edge_export_segments (device_id, batch_id, topic_kind, "
                "source_table, outcome, journal_epoch, first_commit_seq, last_commit_seq) "
                "VALUES ($1, gen_random_uuid(), 'sync/rows/batch', 'rows', $2, $3, $4, $5)",
                scope.device_id, outcome, epoch, first, first + 1)
    await reporter.report()
    assert len(sink.raw) == 4
    topics = {t for t, _ in sink.sent}
    assert topics == {f"{scope.root_topic}/sync/ingest/control"}
    tele = [b for _, b in sink.sent if b["source_table"] == "tele"]
    assert [len(b["committed"]) for b in tele] == [256, 256, 88]
    assert [c["batch_seq"] for b in tele for c in b["committed"]] == list(range(1, 601))
    assert all("journal_epoch" not in b for b in tele)
    (rows,) = [b for _, b in sink.sent if b["source_table"] == "rows"]
    assert rows["journal_epoch"] == str(epoch)
    assert [(c["first_commit_seq"], c["last_commit_seq"]) for c in rows["committed"]] == [
        (1, 2), (5, 6)]  # the rejected batch is not confirmed
    assert len({b["control_id"] for _, b in sink.sent}) == 4
    sink.raw.clear()
    await reporter.report()
    assert sink.raw == []  # the cursor moved past every row read


async def test_a_backlog_round_of_19000_rows_holds_little_python_memory(
        pool: asyncpg.Pool, unique: str) -> None:
    """1,000 devices, 19 batches each: one control each, and a traced peak well under the
    14 MB the round took when the worker grouped the rows itself (a record per row;
    measured 2.8 MB since)."""
    scopes = await _devices(pool, unique, 1000)
    sink = Counter(f"pr-{unique}/")
    reporter = ProgressReporter(pool, sink, interval=0.01)
    await reporter.report()
    async with pool.acquire() as conn:
        # 19,000 rows: room in the round's 20,000 for rows other tests commit meanwhile.
        await _telemetry_rows(conn, [s.device_id for s in scopes], range(1, 20))
    sink.confirmed.clear()
    tracemalloc.start()
    try:
        await reporter.report()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sink.confirmed == [19] * 1000
    assert peak < 6 * 2**20, peak
