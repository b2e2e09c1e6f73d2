"""Device data points: column actions map / auto_create_and_map, live and replayed
values, idempotent redelivery, policy and project checks."""

from __future__ import annotations

import pytest
from governance_helpers import (
    add_device,
    rows_topic,
    target_rows,
    tm_topic,
)
from kits.review_helpers import approve
from kits.telemetry_payloads import T0, Telemetry

from edgesync import governance
from edgesync.errors import ConflictError, InvalidRequestError, NotFoundError
from edgesync.ingest import IngestPipeline, OutcomeStatus, Replayer

ALLOW = {"allow_auto_create_device_data_points": True}


async def values(pool, project_id, dp_id, device_id=None):
    async with pool.acquire() as conn:
        got = await governance.read_data_point_values(conn, project_id, dp_id,
                                                      device_id=device_id, limit=1000)
    return [(r.source_key, r.value) for r in got]


async def test_map_state_column_live_replayed_and_redelivered(pool, batches, unique):
    dev = await add_device(pool, unique, "gw")
    async with pool.acquire() as conn:
        dp = await governance.create_data_point(conn, dev.project_id, name="setpoint",
                                                value_type="real", unit="degC")
    pipe = IngestPipeline(pool)
    f = batches()
    staged = await pipe.handle(rows_topic(dev), f.payload(f.rows(
        ("insert", {"id": 1, "mode": "heat", "setpoint": 20.5}),
        ("insert", {"id": 2, "mode": "cool", "setpoint": None}))))
    assert staged.status is OutcomeStatus.STAGED
    await approve(pool, staged.lineage_id, [
        {"source_column_name": "id", "action": "mirror"},
        {"source_column_name": "mode", "action": "mirror"},
        {"source_column_name": "setpoint", "action": "map", "device_data_point_id": dp.id},
    ])
    assert await Replayer(pool).drain_pending(project_id=dev.project_id) == 2
    # The mapped column is not a column of the target.
    assert await target_rows(pool, staged.lineage_id, "id, mode") == [(1, "heat"), (2, "cool")]
    replayed = await values(pool, dev.project_id, dp.id)
    assert sorted(v for _, v in replayed if v is not None) == [20.5] and len(replayed) == 2

    live = f.payload(f.rows(("update", {"id": 1, "mode": "heat", "setpoint": 21.0})))
    assert (await pipe.handle(rows_topic(dev), live)).status is OutcomeStatus.MATERIALIZED
    assert (await pipe.handle(rows_topic(dev), live)).status is OutcomeStatus.DUPLICATE
    got = await values(pool, dev.project_id, dp.id, dev.device_id)
    assert len(got) == 3 and got[-1][1] == 21.0

    # An older change arriving late loses the upsert: no value either.
    late = f.rows(("update", {"id": 1, "mode": "x", "setpoint": 99.0}))
    late[0]["commit_seq"] = 1
    assert (await pipe.handle(rows_topic(dev), f.payload(late))).status is \
        OutcomeStatus.MATERIALIZED
    assert len(await values(pool, dev.project_id, dp.id)) == 3
    # Re-applying the same change (a replay after a crash) writes no second value.
    from edgesync import _core
    from edgesync.governance import load_state_target
    async with pool.acquire() as conn, conn.transaction():
        lineage = await governance.get_lineage_for_update(conn, staged.lineage_id)
        assert lineage is not None
        target = await load_state_target(conn, lineage, f.schema_hash)
        assert target is not None
        await conn.execute(f"UPDATE {target.table} SET _edge_commit_seq = 0 "
                           "WHERE device_id = $1", dev.device_id)
        await target.apply(conn, dev.device_id, _core.decode_row_batch(live))
    assert len(await values(pool, dev.project_id, dp.id)) == 3


async def test_auto_create_and_map_telemetry_live_and_replayed(pool, unique):
    dev = await add_device(pool, unique, "tg", policy=ALLOW)
    pipe = IngestPipeline(pool)
    tm = Telemetry()
    first = await pipe.handle(tm_topic(dev), tm.samples((T0, 1.5)))
    assert first.status is OutcomeStatus.STAGED
    await approve(pool, first.lineage_id, [
        {"source_column_name": "ts", "action": "ignore"},
        {"source_column_name": "sensor", "action": "mirror"},
        {"source_column_name": "value_c", "action": "auto_create_and_map",
         "data_point_name": "temperature"},
    ])
    await Replayer(pool).drain_pending()
    async with pool.acquire() as conn:
        (dp,) = await governance.list_data_points(conn, dev.project_id)
    assert (dp.name, dp.value_type) == ("temperature", "real")
    later = T0.replace(minute=5)
    live = tm.samples((later, 2.5))
    assert (await pipe.handle(tm_topic(dev), live)).status is OutcomeStatus.MATERIALIZED
    assert (await pipe.handle(tm_topic(dev), live)).status is OutcomeStatus.DUPLICATE
    async with pool.acquire() as conn:
        got = await governance.read_data_point_values(conn, dev.project_id, dp.id,
                                                      device_id=dev.device_id)
        windowed = await governance.read_data_point_values(conn, dev.project_id, dp.id,
                                                           since=later, limit=10)
    assert [(r.ts, r.value) for r in got] == [(T0, 1.5), (later, 2.5)]
    assert [r.value for r in windowed] == [2.5]


async def test_auto_create_needs_the_policy(pool, batches, unique):
    dev = await add_device(pool, unique, "gw")
    pipe = IngestPipeline(pool)
    f = batches()
    out = await pipe.handle(rows_topic(dev), f.payload(
        f.rows(("insert", {"id": 1, "mode": "a", "setpoint": 1.0}))))
    with pytest.raises(InvalidRequestError, match="allow_auto_create_device_data_points"):
        await approve(pool, out.lineage_id, [
            {"source_column_name": "id", "action": "mirror"},
            {"source_column_name": "mode", "action": "mirror"},
            {"source_column_name": "setpoint", "action": "auto_create_and_map"}])
    # Nothing half-done: no data point, the review still waits (claimed).
    async with pool.acquire() as conn:
        assert await governance.list_data_points(conn, dev.project_id) == []
        review = (await governance.list_reviews(conn, status="in_review"))
    assert any(r.lineage_id == out.lineage_id for r in review)


async def test_map_refuses_another_projects_data_point(pool, batches, unique):
    dev = await add_device(pool, unique, "gw")
    other = await add_device(pool, unique + "x", "gw")
    async with pool.acquire() as conn:
        foreign = await governance.create_data_point(conn, other.project_id, name="setpoint",
                                                     value_type="real")
        with pytest.raises(ConflictError):
            await governance.create_data_point(conn, other.project_id, name="setpoint",
                                               value_type="text")
        with pytest.raises(NotFoundError):
            await governance.read_data_point_values(conn, dev.project_id, foreign.id)
    pipe = IngestPipeline(pool)
    f = batches()
    out = await pipe.handle(rows_topic(dev), f.payload(
        f.rows(("insert", {"id": 1, "mode": "a", "setpoint": 1.0}))))
    actions = [{"source_column_name": "id", "action": "mirror"},
               {"source_column_name": "mode", "action": "mirror"},
               {"source_column_name": "setpoint", "action": "map",
                "device_data_point_id": str(foreign.id)}]
    with pytest.raises(InvalidRequestError, match="in this project"):
        await approve(pool, out.lineage_id, actions)
    review = await queued_review_or_claimed(pool, out.lineage_id)
    with pytest.raises(InvalidRequestError, match="required for action map"):
        async with pool.acquire() as conn:
            await governance.approve_review(
                conn, review.id, actor="t", action_version=review.action_version,
                column_actions=[*actions[:2], {"source_column_name": "setpoint",
                                               "action": "map"}])


async def queued_review_or_claimed(pool, lineage_id):
    async with pool.acquire() as conn:
        (review,) = [r for r in await governance.list_reviews(conn)
                     if r.lineage_id == lineage_id]
    return review

