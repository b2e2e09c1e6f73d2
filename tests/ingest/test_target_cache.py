"""Live targets' columns are kept between groups (``governance._target_cache``): the
bindings are read from the catalog once per lineage, not once per group (equal answers
kept once), and a column
type an operator altered by hand since is noticed, not taken for bad data."""

from __future__ import annotations

from datetime import timedelta

import asyncpg
from ingest.ingest_kit import fleet, tm_topic, topic
from kits.telemetry_payloads import T0, Telemetry

from edgesync import governance
from edgesync.governance._target_cache import target_cache
from edgesync.ingest import GroupWriter, IngestPipeline, OutcomeStatus
from edgesync.materialize import quote_ident


async def test_targets_are_read_once_then_kept(pool: asyncpg.Pool, batches, unique) -> None:
    scopes, factories, _ = await fleet(pool, batches, unique, 3)
    pipe = IngestPipeline(pool, writer=GroupWriter(pool))
    governance.forget_targets()
    for step in range(3):
        for s, f in zip(scopes, factories, strict=True):
            out = await pipe.handle(topic(s), f.payload(f.rows(
                ("insert" if step == 0 else "update",
                 {"id": 1, "mode": f"m{step}", "setpoint": float(step)})),
                with_schema=step == 0))
            assert out.status is OutcomeStatus.MATERIALIZED
    # Each lineage read once; its later batches found their target kept. The three
    # devices' columns are equal: kept once.
    assert (len(target_cache), target_cache.distinct) == (3, 1)
    assert governance.forget_targets()  # answers were served from the cache
    assert not governance.forget_targets()  # and none since


async def test_a_column_type_altered_by_hand_is_read_again(pool: asyncpg.Pool, batches,
                                                           unique) -> None:
    scopes, _, _ = await fleet(pool, batches, unique, 1, telemetry=True)
    device = scopes[0]
    pipe = IngestPipeline(pool, writer=GroupWriter(pool))
    samples = Telemetry()
    samples.seq = 10
    first = await pipe.handle(tm_topic(device), samples.payload(
        samples.rows((T0 + timedelta(minutes=1), 20.5))))
    assert first.status is OutcomeStatus.MATERIALIZED
    table = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                first.lineage_id)
    # The kept target says double precision, written as binary COPY values; the
    # column is text now, so that COPY fails — once: the retry reads the catalog again
    # and writes text.
    await pool.execute(f"ALTER TABLE {quote_ident(table)} ALTER COLUMN value_c TYPE text")
    second = await pipe.handle(tm_topic(device), samples.payload(
        samples.rows((T0 + timedelta(minutes=2), 21.5))))
    assert (second.status, second.code) == (OutcomeStatus.MATERIALIZED, None)
    values = await pool.fetch(f"SELECT value_c FROM {quote_ident(table)} "
                              "WHERE device_id = $1 ORDER BY event_ts", device.device_id)
    assert [float(r["value_c"]) for r in values][-2:] == [20.5, 21.5]
