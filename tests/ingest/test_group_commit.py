"""Group commit: the batches of many devices in shared transactions, a cost per batch
that does not grow with the fleet (counted, not timed), and a poisoned batch that
neither rolls back nor loses its neighbours."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest
from ingest.ingest_kit import fleet, topic

import edgesync.fleet
from edgesync import _core
from edgesync.ingest import GroupWriter, IngestPipeline, OutcomeStatus
from edgesync.ingest._accept import Work, accept_group
from edgesync.ingest._group import _Entry
from edgesync.materialize import quote_ident
from edgesync.protocol import TopicKind
from edgesync.store import create_pool


def upserts(f: Any, step: int, n: int = 5) -> bytes:
    return f.payload(f.rows(*[("insert" if step == 0 else "update",
                               {"id": k, "mode": f"m{step}", "setpoint": float(step)})
                              for k in range(1, n + 1)]), with_schema=step == 0)


class Counted:
    """A pipeline on its own two-connection pool whose statements are counted."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self.statements = 0
        self.pipe = IngestPipeline(pool, writer=GroupWriter(pool))

    @classmethod
    async def open(cls, database_url: str) -> Counted:
        pool = await create_pool(database_url, min_size=2, max_size=2)
        me = cls(pool)
        conns = [await pool.acquire() for _ in range(2)]
        for conn in conns:
            conn.add_query_logger(me._count)
            await pool.release(conn)
        return me

    def _count(self, record: object) -> None:
        self.statements += 1

    async def temp_relations(self) -> int:
        """Temporary relations on the pool's connections: each one left by an
        ``ON COMMIT DELETE ROWS`` table is truncated at every commit."""
        conns = [await self.pool.acquire() for _ in range(2)]
        try:
            return sum([await c.fetchval("SELECT count(*) FROM pg_class WHERE relnamespace = "
                                         "pg_my_temp_schema() AND relkind = 'r'") for c in conns])
        finally:
            for c in conns:
                await self.pool.release(c)


async def round_of(pipe: IngestPipeline, scopes: list[edgesync.fleet.DeviceScope],
                   factories: list[Any], step: int) -> list[Any]:
    return await asyncio.gather(*[pipe.handle(topic(s), upserts(f, step))
                                  for s, f in zip(scopes, factories, strict=True)])


@pytest.mark.slow
async def test_cost_per_batch_does_not_grow_with_devices(pool, database_url, batches, unique):
    figures = {}
    for n in (5, 500):
        scopes, factories, _ = await fleet(pool, batches, f"{unique}{n}", n)
        counted = await Counted.open(database_url)
        try:
            for step in range(3):  # lineage creation, then live batches
                before = counted.statements
                outcomes = await round_of(counted.pipe, scopes, factories, step)
                assert {o.status for o in outcomes} == {OutcomeStatus.MATERIALIZED}
            figures[n] = ((counted.statements - before) / n, await counted.temp_relations(),
                          max(counted.pipe.writer.group_sizes))
        finally:
            await counted.pool.close()
    (per_5, temps_5, _), (per_500, temps_500, biggest) = figures[5], figures[500]
    # One staging table per column layout, whatever the number of lineages using it.
    assert temps_500 == temps_5
    # Statements per live batch: the group's statements are shared, so more devices
    # sending at once never cost more per batch.
    assert per_500 <= per_5
    assert per_500 < 2, figures
    assert biggest > 50, figures


async def test_a_live_group_sends_its_upsert_and_settle_with_the_commit(
        pool, database_url, batches, unique):
    """At half load a group is small and every round trip of it waits for a core: a
    live group of state batches is BEGIN (with the staging table the last groups
    needed), lock, ledger claim, COPY, and one message with the upsert, the settle and
    the COMMIT."""
    scopes, factories, table = await fleet(pool, batches, unique, 6)
    counted = await Counted.open(database_url)
    sent: list[str] = []
    try:
        await round_of(counted.pipe, scopes, factories, 0)  # lineage creation
        conns = [await counted.pool.acquire() for _ in range(2)]
        for conn in conns:
            conn.add_query_logger(lambda r: sent.append(r.query))
            await counted.pool.release(conn)
        writer = counted.pipe.writer
        writer.group_sizes.clear()
        # Queued before anyone leads: one group.
        entries = [_Entry(s, TopicKind.ROWS_BATCH, upserts(f, 1), None,
                          asyncio.get_running_loop().create_future())
                   for s, f in zip(scopes, factories, strict=True)]
        writer._pending.extend(entries)
        await writer._lead(entries[0])
        await asyncio.sleep(0)  # (query loggers are called soon after)
        assert {e.future.result().status for e in entries} == {OutcomeStatus.MATERIALIZED}
    finally:
        await counted.pool.close()
    assert dict(writer.group_sizes) == {6: 1}
    # (asyncpg's query logger does not see the COPY, before the last one.)
    assert [q.split()[0] for q in sent] == ["BEGIN;", "SELECT", "INSERT", "INSERT"], sent
    assert "CREATE TEMP TABLE IF NOT EXISTS _edge_in_" in sent[0]
    last = sent[-1]
    assert f"INSERT INTO {quote_ident(table)}" in last
    assert "UPDATE edge_table_lineages" in last and last.endswith("COMMIT")
    rows = await pool.fetchval(f"SELECT count(*) FROM {quote_ident(table)} WHERE mode = 'm1'")
    assert rows == 6 * 5
    counts = await pool.fetchval("SELECT sum(materialized_rows) FROM edge_table_lineages "
                                 "WHERE device_id = ANY($1)", [s.device_id for s in scopes])
    assert counts == 1 + 6 * 5 + 6 * 5


async def test_a_poisoned_row_is_quarantined_and_its_batch_and_neighbours_materialize(
        pool, batches, unique):
    scopes, factories, table = await fleet(pool, batches, unique, 12)
    pipe = IngestPipeline(pool, writer=GroupWriter(pool, lanes=1))
    outcomes = await round_of(pipe, scopes, factories, 0)
    assert {o.status for o in outcomes} == {OutcomeStatus.MATERIALIZED}
    # An operator narrowed a column: one row of one device no longer fits (PostgreSQL
    # refuses it while writing the shared COPY's upsert).
    await pool.execute(f"ALTER TABLE {quote_ident(table)} ALTER COLUMN mode TYPE varchar(8)")
    bad = 7
    payloads = [upserts(f, 1) for f in factories]
    f = factories[bad]
    payloads[bad] = f.payload(f.rows(
        ("update", {"id": 1, "mode": "m1", "setpoint": 1.0}),
        ("update", {"id": 2, "mode": "far-too-long-for-8", "setpoint": 9.0}),
        ("update", {"id": 3, "mode": "m1", "setpoint": 1.0})), with_schema=False)
    pipe.writer.group_sizes.clear()
    outcomes = await asyncio.gather(*[pipe.handle(topic(s), p)
                                      for s, p in zip(scopes, payloads, strict=True)])
    assert max(pipe.writer.group_sizes) > 1  # they really shared a transaction
    assert [(o.status, o.code) for o in outcomes] == [(OutcomeStatus.MATERIALIZED, None)] * 12
    assert outcomes[bad].rows == 2 and outcomes[bad].detail == "1 row(s) quarantined"
    rows = await pool.fetch(f"SELECT device_id, id, mode FROM {quote_ident(table)}")
    modes = {(r["device_id"], r["id"]): r["mode"] for r in rows}
    bad_device = scopes[bad].device_id
    # The refused row keeps its old value; the batch's other rows and every neighbour
    # are written.
    assert [modes[(bad_device, k)] for k in (1, 2, 3)] == ["m1", "m0", "m1"]
    assert all(modes[(s.device_id, k)] == "m1" for i, s in enumerate(scopes) if i != bad
               for k in range(1, 6))
    lineage = await pool.fetchrow(
        "SELECT status, materialization_errors, staged_rows FROM edge_table_lineages "
        "WHERE id = $1", outcomes[bad].lineage_id)
    # A row's data error is not the lineage's: nothing staged, the breaker not counted.
    assert dict(lineage) == {"status": "active", "materialization_errors": 0,
                             "staged_rows": 0}
    ledger = await pool.fetch("SELECT outcome, quarantined_rows FROM edge_export_segments "
                              "WHERE lineage_id = $1 ORDER BY id", outcomes[bad].lineage_id)
    assert [tuple(r) for r in ledger] == [("materialized", 0), ("materialized", 1)]
    q = await pool.fetch("SELECT * FROM edge_quarantined_rows WHERE lineage_id = $1",
                         outcomes[bad].lineage_id)
    assert len(q) == 1
    assert (q[0]["status"], q[0]["reason_code"], q[0]["op"]) == ("open", "22001", "update")
    assert "value too long" in q[0]["reason"]
    assert '"mode":"far-too-long-for-8"' in q[0]["row_json"]
    assert q[0]["pk_hash"] == _core.pk_hash(b'{"id":2}')


async def test_redeliveries_in_and_across_groups_write_nothing_twice(pool, batches, unique):
    scopes, factories, table = await fleet(pool, batches, unique, 6)
    pipe = IngestPipeline(pool)
    payloads = [(topic(s), upserts(f, 0)) for s, f in zip(scopes, factories, strict=True)]
    # Every batch twice in one gathering (the second often in the same group), then again.
    first = await asyncio.gather(*[pipe.handle(t, p) for t, p in payloads + payloads])
    again = await asyncio.gather(*[pipe.handle(t, p) for t, p in payloads])
    statuses = [o.status for o in first]
    assert statuses.count(OutcomeStatus.MATERIALIZED) == 6
    assert statuses.count(OutcomeStatus.DUPLICATE) == 6
    assert {o.status for o in again} == {OutcomeStatus.DUPLICATE}
    counts = await pool.fetch("SELECT count(*) AS n FROM edge_export_segments s JOIN "
                              "unnest($1::uuid[]) AS d(id) ON s.device_id = d.id "
                              "GROUP BY s.device_id", [s.device_id for s in scopes])
    # This batch once per device, and the first device's seed.
    assert sorted(r["n"] for r in counts) == [1] * 5 + [2]
    materialized = await pool.fetchval(
        "SELECT sum(materialized_rows) FROM edge_table_lineages WHERE device_id = ANY($1)",
        [s.device_id for s in scopes])
    assert materialized == 6 * 5 + 1
    assert await pool.fetchval(f"SELECT count(*) FROM {quote_ident(table)}") == 6 * 5 + 1


async def test_a_cancelled_leader_hands_its_group_to_the_others(pool, batches, unique):
    scopes, factories, table = await fleet(pool, batches, unique, 8)
    writer = GroupWriter(pool, lanes=1)
    pipe = IngestPipeline(pool, writer=writer)
    tasks = [asyncio.create_task(pipe.handle(topic(s), upserts(f, 0)))
             for s, f in zip(scopes, factories, strict=True)]
    await asyncio.sleep(0)  # all queued; the first task leads
    tasks[0].cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(results[0], asyncio.CancelledError)
    assert {r.status for r in results[1:]} == {OutcomeStatus.MATERIALIZED}
    assert writer.queued == 0
    rows = await pool.fetchval(f"SELECT count(DISTINCT device_id) FROM {quote_ident(table)} "
                               "WHERE mode = 'm0'")
    assert rows in (7, 8)  # the cancelled one may have committed before the cancel


async def test_callers_cancelled_with_their_leader_leave_no_batch_in_the_queue(
        pool, batches, unique):
    """A lost broker connection cancels every message's task at once (abandoned, sent
    again by the broker). A follower cancelled while its batch was in a group being
    written must not be put back in the queue by its cancelled leader: at the head, with
    nobody waiting on it, it took every nudge of a freed lane, and the batches queued
    behind it waited for ever (found by the soak: a worker stuck after a broker restart
    with a full window)."""
    scopes, factories, _ = await fleet(pool, batches, unique, 6)
    writer = GroupWriter(pool, lanes=2, max_group=2)
    pipe = IngestPipeline(pool, writer=writer)
    gate, both = asyncio.Event(), asyncio.Event()
    write = writer._write
    groups: list[list[int]] = []
    index = {s.device_id: i for i, s in enumerate(scopes)}

    async def held(group: list[_Entry]) -> None:
        groups.append([index[e.scope.device_id] for e in group])
        if len(groups) == 2:
            both.set()
        await gate.wait()
        await write(group)

    writer._write = held  # type: ignore[method-assign]
    tasks = [asyncio.create_task(pipe.handle(topic(s), upserts(f, 0)))
             for s, f in zip(scopes, factories, strict=True)]
    await asyncio.wait_for(both.wait(), 30)
    assert groups == [[0], [1, 2]]  # the first alone, the second after its linger; 3 wait
    # The follower first, then its leader: the order in which the follower is still
    # taken when it stops waiting.
    tasks[2].cancel()
    tasks[1].cancel()
    await asyncio.gather(tasks[1], tasks[2], return_exceptions=True)
    # Only batches whose callers wait are queued (a freed lane may lead some already).
    waiting = {s.device_id for s in scopes[3:]}
    assert {e.scope.device_id for e in writer._pending} <= waiting
    gate.set()
    outcomes = await asyncio.wait_for(asyncio.gather(tasks[0], *tasks[3:]), 30)
    assert {o.status for o in outcomes} == {OutcomeStatus.MATERIALIZED}
    assert writer.queued == 0


async def test_a_group_records_the_columns_its_later_batch_carried(pool, batches, unique):
    async with pool.acquire() as conn:
        scope = await edgesync.fleet.add_device(conn, project=f"gs-{unique}", name=f"gs-{unique}",
                                                topic_slug=f"gs-{unique}")
    f = batches()
    bare = f.payload(f.rows(("insert", {"id": 1, "mode": "a", "setpoint": 1.0})),
                     with_schema=False)
    full = f.payload(f.rows(("insert", {"id": 2, "mode": "b", "setpoint": 2.0})))
    # One group, the bare batch first.
    works = [Work(scope, TopicKind.ROWS_BATCH, p, _core.decode_row_batch(p)) for p in (bare, full)]
    async with pool.acquire() as conn, conn.transaction():
        await accept_group(conn, works)
    outcomes = [w.outcome for w in works]
    assert {(o.status, o.code) for o in outcomes if o} == {(OutcomeStatus.STAGED, "schema_review")}
    assert outcomes[0] is not None
    columns = await pool.fetchval(
        "SELECT schema_columns FROM edge_schema_versions WHERE lineage_id = $1",
        outcomes[0].lineage_id)
    assert [c["name"] for c in columns["columns"]] == ["id", "mode", "setpoint"]


async def test_one_group_with_a_device_twice_keeps_its_newest_change(pool, batches, unique):
    """The group's rows are written with one COPY and one upsert. Batches of distinct
    devices skip the newest-change sort; a device with two batches in the group (the
    newer one first) does not, and its newest change wins."""
    scopes, factories, table = await fleet(pool, batches, unique, 3)
    for s, f in zip(scopes, factories, strict=True):  # the lineages, approved on arrival
        await IngestPipeline(pool).handle(topic(s), upserts(f, 0, n=2))
    older, newer = upserts(factories[0], 1, n=2), upserts(factories[0], 2, n=2)
    others = [upserts(f, 3, n=2) for f in factories[1:]]

    def work(scope: edgesync.fleet.DeviceScope, payload: bytes) -> Work:
        return Work(scope, TopicKind.ROWS_BATCH, payload, _core.decode_row_batch(payload))

    for group in ([work(scopes[0], newer), work(scopes[0], older)],  # one device twice
                  [work(s, p) for s, p in zip(scopes[1:], others, strict=True)]):
        async with pool.acquire() as conn, conn.transaction():
            await accept_group(conn, group)
        assert {w.outcome.status for w in group if w.outcome} == {OutcomeStatus.MATERIALIZED}
    rows = await pool.fetch(f"SELECT device_id, id, mode FROM {quote_ident(table)} "
                            "WHERE device_id = ANY($1) ORDER BY device_id, id",
                            [s.device_id for s in scopes])
    want = {(scopes[0].device_id, k, "m2") for k in (1, 2)}
    want |= {(s.device_id, k, "m3") for s in scopes[1:] for k in (1, 2)}
    want.add((scopes[0].device_id, 0, "seed"))
    assert {(r["device_id"], r["id"], r["mode"]) for r in rows} == want


async def test_a_lane_takes_no_batch_of_a_device_the_other_lane_writes(pool, unique):
    """Two lanes lock disjoint lineages: batches of a device whose group is being
    written wait, in their order, for the next group (GroupWriter._take)."""
    async with pool.acquire() as conn:
        a, b, c = [await edgesync.fleet.add_device(conn,
                                                   project=f"ln-{unique}", name=f"{n}-{unique}",
                                                   topic_slug=f"ln-{unique}") for n in "abc"]
    writer = GroupWriter(pool, max_group=3)
    loop = asyncio.get_running_loop()
    entries = [_Entry(s, TopicKind.ROWS_BATCH, b"", None, loop.create_future())
               for s in (a, b, a, c, b, a)]
    writer._pending.extend(entries)
    first = writer._take()  # nothing in flight: the three oldest
    assert first == entries[:3]
    second = writer._take()  # a and b are being written: c only
    assert second == [entries[3]]
    assert list(writer._pending) == [entries[4], entries[5]]  # b and a keep their order
    writer._release(first)
    third = writer._take()
    assert third == [entries[4], entries[5]]
    for group in (second, third):
        writer._release(group)
    assert not writer._writing
