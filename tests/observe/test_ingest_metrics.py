"""Ingest metrics move as messages flow, and obey the conservation rule of
docs/operations.md per topic kind — after a run with duplicates, rejections, staged
batches, unknown devices, unknown topics and ignored kinds, and while a batch is in
flight."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
from ingest.ingest_kit import fleet, tm_topic, topic
from kits.e2e_kit import eventually
from kits.telemetry_payloads import T0, Telemetry
from metrics_kit import assert_conserved, conservation, samples_of, total, value

from edgesync.ingest import IngestPipeline, OutcomeStatus

ROWS = 4


def upsert(f: Any, step: int) -> bytes:
    return f.payload(f.rows(*[("insert", {"id": k, "mode": f"m{step}", "setpoint": 1.0})
                              for k in range(1, ROWS + 1)]))


async def test_counts_add_up_after_a_run_with_duplicates_and_rejections(
        pool: asyncpg.Pool, batches: Any, unique: str) -> None:
    scopes, factories, _ = await fleet(pool, batches, unique, 3, telemetry=True)
    pipe = IngestPipeline(pool)
    m = pipe.metrics.registry
    assert_conserved(samples_of(m))

    sent = [(topic(s), upsert(f, 1)) for s, f in zip(scopes, factories, strict=True)]
    out = await asyncio.gather(*(pipe.handle(t, p) for t, p in sent))
    assert {o.status for o in out} == {OutcomeStatus.MATERIALIZED}
    # The same messages again: duplicates; a broken one: rejected.
    await asyncio.gather(*(pipe.handle(t, p) for t, p in sent))
    bad = factories[0].payload(factories[0].rows(("insert", {"id": 9, "mode": "x",
                                                             "setpoint": 0.0})),
                               format_version=7)
    assert (await pipe.handle(topic(scopes[0]), bad)).code == "unsupported_format_version"
    # A table nobody approved yet: staged for its review.
    other = batches("other_table")
    staged = await pipe.handle(topic(scopes[1]), other.payload(other.rows(
        ("insert", {"id": 1, "mode": "s", "setpoint": 2.0}))))
    assert staged.status is OutcomeStatus.STAGED
    tel = await pipe.handle(tm_topic(scopes[2]), Telemetry().samples((T0, 1.0), (T0, 2.0)))
    assert tel.status is OutcomeStatus.MATERIALIZED, tel
    # Not batches: an unknown device, a bad ACK, a kind devices must not send, a topic
    # that is not a sync topic.
    await pipe.handle(f"{scopes[0].topic_slug}/nobody-{unique}/sync/rows/batch", sent[0][1])
    await pipe.handle(f"{scopes[0].root_topic}/sync/ingest/ack", b"{}")
    await pipe.handle(f"{scopes[0].root_topic}/sync/ingest/control", b"{}")
    await pipe.handle("not/a/sync/topic/at-all", b"{}")

    s = samples_of(m)
    assert_conserved(s)
    msgs = "edgesync_ingest_messages_total"
    assert value(s, msgs, kind="rows_batch", outcome="materialized", code="") == 3
    assert value(s, msgs, kind="rows_batch", outcome="duplicate", code="") == 3
    assert value(s, msgs, kind="rows_batch", outcome="rejected",
                 code="unsupported_format_version") == 1
    assert value(s, msgs, kind="rows_batch", outcome="rejected", code="unknown_device") == 1
    assert value(s, msgs, kind="rows_batch", outcome="staged", code="schema_review") == 1
    assert value(s, msgs, kind="telemetry_batch", outcome="materialized", code="") == 1
    assert value(s, msgs, kind="ingest_ack", outcome="rejected", code="invalid_ack") == 1
    assert value(s, msgs, kind="ingest_control", outcome="ignored", code="") == 1
    assert value(s, msgs, kind="unknown", outcome="rejected", code="invalid_topic") == 1
    assert conservation(s)["rows_batch"] == (9, 9, 0)
    rows = "edgesync_ingest_rows_total"
    assert value(s, rows, pipeline="rows", outcome="materialized") == 3 * ROWS
    assert value(s, rows, pipeline="rows", outcome="staged") == 1
    assert value(s, rows, pipeline="telemetry", outcome="materialized") == 2
    # Every batch message of a known device went through a group (the unknown one not).
    assert value(s, "edgesync_ingest_group_size_sum") == 3 + 3 + 1 + 1 + 1
    assert value(s, "edgesync_ingest_group_commit_seconds_count") == \
        value(s, "edgesync_ingest_group_size_count") >= 1
    assert total(s, "edgesync_ingest_duration_seconds_count") == 9 + 1 + 1 + 1 + 1
    # No device, lineage or project id among the labels.
    ids = {str(x.device_id) for x in scopes} | {str(scopes[0].project_id)}
    assert not {v for (_, labels) in s for _, v in labels} & ids


async def test_a_batch_in_flight_is_counted_as_such(pool: asyncpg.Pool, batches: Any,
                                                    unique: str) -> None:
    scopes, factories, _ = await fleet(pool, batches, unique, 1)
    pipe = IngestPipeline(pool)
    m = pipe.metrics.registry
    lineage = await pool.fetchval("SELECT id FROM edge_table_lineages WHERE device_id = $1",
                                  scopes[0].device_id)
    async with pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        # Holding the lineage's lock: the group waits for it, the message stays in flight.
        await conn.execute("SELECT 1 FROM edge_table_lineages WHERE id = $1 FOR UPDATE",
                           lineage)
        task = asyncio.create_task(pipe.handle(topic(scopes[0]), upsert(factories[0], 2)))
        try:
            async def in_flight() -> bool:
                await asyncio.sleep(0.01)
                return value(samples_of(m), "edgesync_ingest_messages_in_flight",
                             kind="rows_batch") == 1

            await eventually(in_flight, 30, "one batch in flight")
            s = samples_of(m)
            assert conservation(s)["rows_batch"] == (1, 0, 1)
            assert_conserved(s)
        finally:
            await tx.rollback()
        assert (await task).status is OutcomeStatus.MATERIALIZED
    s = samples_of(m)
    assert conservation(s)["rows_batch"] == (1, 1, 0)


async def test_a_cancelled_message_is_counted_abandoned(pool: asyncpg.Pool, batches: Any,
                                                        unique: str) -> None:
    scopes, factories, _ = await fleet(pool, batches, unique, 1)
    pipe = IngestPipeline(pool)
    lineage = await pool.fetchval("SELECT id FROM edge_table_lineages WHERE device_id = $1",
                                  scopes[0].device_id)
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT 1 FROM edge_table_lineages WHERE id = $1 FOR UPDATE",
                           lineage)
        task = asyncio.create_task(pipe.handle(topic(scopes[0]), upsert(factories[0], 3)))

        async def in_flight() -> bool:
            await asyncio.sleep(0.01)
            return value(samples_of(pipe.metrics.registry),
                         "edgesync_ingest_messages_in_flight", kind="rows_batch") == 1

        await eventually(in_flight, 30, "one batch in flight")
        task.cancel()
        await asyncio.wait({task})
    s = samples_of(pipe.metrics.registry)
    assert value(s, "edgesync_ingest_messages_total", kind="rows_batch", outcome="abandoned",
                 code="") == 1
    assert_conserved(s)
