"""Registry coalescing: one registry review per (scope, table, hash), a coalesced target
shared by the devices of a project or fleet, auto-approval of later devices."""

from __future__ import annotations

import uuid

import pytest
from governance_helpers import add_device, rows_topic, target_rows, tm_topic
from kits.telemetry_payloads import T0, Telemetry

from edgesync import governance
from edgesync.errors import ConflictError, InvalidRequestError
from edgesync.ingest import IngestPipeline, OutcomeStatus, Replayer

PROJECT = {"schema_coalescing_mode": "project"}
FLEET = {"schema_coalescing_mode": "fleet"}


def insert(f, key: int, mode: str) -> bytes:
    return f.payload(f.rows(("insert", {"id": key, "mode": mode, "setpoint": float(key)})))


async def registry_reviews(pool, project_id, status=None):
    async with pool.acquire() as conn:
        return await governance.list_registry_reviews(conn, project_id, status=status)


async def approve_registry(pool, review, actions=None):
    async with pool.acquire() as conn:
        claimed = await governance.claim_registry_review(
            conn, review.id, actor="t", action_version=review.action_version)
        return await governance.approve_registry_review(
            conn, review.id, actor="t", action_version=claimed.action_version,
            column_actions=actions)


async def test_project_scope_one_review_one_table_later_device_auto_approved(
        pool, batches, unique):
    a = await add_device(pool, unique, "a", policy=PROJECT)
    b = await add_device(pool, unique, "b")
    pipe = IngestPipeline(pool)
    fa, fb = batches(), batches()
    out_a = await pipe.handle(rows_topic(a), insert(fa, 1, "a1"))
    out_b = await pipe.handle(rows_topic(b), insert(fb, 1, "b1"))
    assert out_a.status is out_b.status is OutcomeStatus.STAGED
    assert out_a.code == out_b.code == "schema_review"
    (review,) = await registry_reviews(pool, a.project_id)
    assert (review.status, review.source_table) == ("queued", "device_state")
    async with pool.acquire() as conn:  # no device review in coalesced mode
        assert not [r for r in await governance.list_reviews(conn, project_id=a.project_id)]

    approved = await approve_registry(pool, review)
    table = f"edge_state_p{a.project_id.hex[:8]}_device_state"
    assert (approved.status, approved.target_table) == ("approved", table)
    assert await Replayer(pool).drain_pending(project_id=a.project_id) == 2
    targets = await pool.fetch("SELECT target_table, status FROM edge_table_lineages "
                               "WHERE id = ANY($1)", [out_a.lineage_id, out_b.lineage_id])
    assert {tuple(r) for r in targets} == {(table, "active")}
    rows = await target_rows(pool, out_a.lineage_id, "device_id, id, mode")
    assert sorted(rows) == sorted([(a.device_id, 1, "a1"), (b.device_id, 1, "b1")])

    # Live batches go straight to the shared table.
    live = await pipe.handle(rows_topic(b), fb.payload(
        fb.rows(("update", {"id": 1, "mode": "b2", "setpoint": 2.0}))))
    assert live.status is OutcomeStatus.MATERIALIZED
    # A third device with the approved hash: auto-approved, no review, no staging.
    c = await add_device(pool, unique, "c")
    out_c = await pipe.handle(rows_topic(c), insert(batches(), 5, "c5"))
    assert out_c.status is OutcomeStatus.MATERIALIZED
    assert len(await registry_reviews(pool, a.project_id)) == 1
    rows = await target_rows(pool, out_a.lineage_id, "device_id, id, mode")
    assert sorted(rows) == sorted([(a.device_id, 1, "a1"), (b.device_id, 1, "b2"),
                                   (c.device_id, 5, "c5")])
    async with pool.acquire() as conn:
        (mirror,) = await governance.list_coalesced_mirrors(conn, a.project_id)
        (entry,) = await governance.list_registry_entries(conn, a.project_id)
        detail = await governance.get_registry_entry(conn, a.project_id, entry.id)
    assert (mirror.target_table, mirror.scope, mirror.device_count) == (table,
                                                                                 "project", 3)
    assert len(detail.devices) == 3


async def test_fleet_scope_separates_fleets(pool, batches, unique):
    north1 = await add_device(pool, unique, "n1", fleet="north", policy=FLEET)
    north2 = await add_device(pool, unique, "n2", fleet="north")
    south = await add_device(pool, unique, "s1", fleet="south")
    pipe = IngestPipeline(pool)
    outs = [await pipe.handle(rows_topic(d), insert(batches(), 1, d.device_name))
            for d in (north1, north2, south)]
    reviews = await registry_reviews(pool, north1.project_id)
    assert sorted(str(r.fleet_id) for r in reviews) == sorted(
        [str(north1.fleet_id), str(south.fleet_id)])
    (north_review,) = [r for r in reviews if r.fleet_id == north1.fleet_id]
    await approve_registry(pool, north_review)
    await Replayer(pool).drain_pending()
    table = f"edge_state_f{north1.fleet_id.hex[:8]}_device_state"
    rows = await pool.fetch(f'SELECT device_id FROM "{table}"')
    assert {r["device_id"] for r in rows} == {north1.device_id, north2.device_id}
    south_lineage = await pool.fetchrow("SELECT status, target_table FROM edge_table_lineages "
                                        "WHERE id = $1", outs[2].lineage_id)
    assert tuple(south_lineage) == ("paused", None)
    async with pool.acquire() as conn:
        mirrors = await governance.list_coalesced_mirrors(conn, north1.project_id,
                                                          fleet_id=south.fleet_id)
    assert mirrors == []


async def test_fleet_telemetry_with_mapping_and_abandon(pool, unique):
    policy = {**FLEET, "allow_auto_create_device_data_points": True}
    d1 = await add_device(pool, unique, "t1", fleet="f", policy=policy)
    d2 = await add_device(pool, unique, "t2", fleet="f")
    pipe = IngestPipeline(pool)
    for d in (d1, d2):
        out = await pipe.handle(tm_topic(d), Telemetry().samples((T0, 1.0)))
        assert out.status is OutcomeStatus.STAGED
    (review,) = await registry_reviews(pool, d1.project_id)
    with pytest.raises(InvalidRequestError, match="defer"):
        await approve_registry(pool, review, [
            {"source_column_name": "ts", "action": "defer"},
            {"source_column_name": "value_c", "action": "mirror"},
            {"source_column_name": "sensor", "action": "mirror"}])
    review = (await registry_reviews(pool, d1.project_id))[0]
    async with pool.acquire() as conn:
        await governance.approve_registry_review(
            conn, review.id, actor="t", action_version=review.action_version,
            column_actions=[{"source_column_name": "ts", "action": "ignore"},
                            {"source_column_name": "value_c", "action": "auto_create_and_map"},
                            {"source_column_name": "sensor", "action": "mirror"}])
    assert await Replayer(pool).drain_pending(project_id=d1.project_id) == 2
    table = f"edge_ts_f{d1.fleet_id.hex[:8]}_temps"
    rows = await pool.fetch(f'SELECT device_id, sensor FROM "{table}"')
    assert sorted(r["device_id"] for r in rows) == sorted([d1.device_id, d2.device_id])
    async with pool.acquire() as conn:
        (dp,) = await governance.list_data_points(conn, d1.project_id)
        got = await governance.read_data_point_values(conn, d1.project_id, dp.id)
    assert sorted((r.device_id, r.value) for r in got) == sorted(
        [(d1.device_id, 1.0), (d2.device_id, 1.0)])

    # A second table: abandon its registry review → per-device reviews instead.
    for d in (d1, d2):
        await pipe.handle(tm_topic(d), Telemetry("hums").samples((T0, 2.0)))
    (other,) = await registry_reviews(pool, d1.project_id, status="queued")
    async with pool.acquire() as conn:
        with pytest.raises(ConflictError, match="action_version"):
            await governance.abandon_registry_review(conn, other.id, actor="t",
                                                     action_version=7)
        done = await governance.abandon_registry_review(
            conn, other.id, actor="t", action_version=other.action_version,
            reason="heterogeneous")
        device_reviews = await governance.list_reviews(conn, project_id=d1.project_id,
                                                       status="queued")
    assert done.status == "abandoned"
    assert sorted(r.device_id for r in device_reviews) == sorted(
        [d1.device_id, d2.device_id])
    # A later device with the abandoned hash gets a device review too.
    d3 = await add_device(pool, unique, "t3", fleet="f")
    out3 = await pipe.handle(tm_topic(d3), Telemetry("hums").samples((T0, 3.0)))
    assert (out3.status, out3.code) == (OutcomeStatus.STAGED, "schema_review")
    async with pool.acquire() as conn:
        assert len(await governance.list_reviews(conn, project_id=d1.project_id,
                                                 status="queued")) == 3


async def test_registry_reject_keeps_devices_paused(pool, batches, unique):
    a = await add_device(pool, unique, "a", policy=PROJECT)
    pipe = IngestPipeline(pool)
    out = await pipe.handle(rows_topic(a), insert(batches(), 1, "x"))
    (review,) = await registry_reviews(pool, a.project_id)
    async with pool.acquire() as conn:
        rejected = await governance.reject_registry_review(
            conn, review.id, actor="t", action_version=1, reason="no")
        with pytest.raises(ConflictError):
            await governance.claim_registry_review(conn, review.id, actor="t",
                                                   action_version=rejected.action_version)
    b = await add_device(pool, unique, "b")
    later = await pipe.handle(rows_topic(b), insert(batches(), 1, "y"))
    assert (later.status, later.code) == (OutcomeStatus.STAGED, "schema_review")
    statuses = await pool.fetch(
        "SELECT l.status, v.status AS v FROM edge_table_lineages l JOIN edge_schema_versions v "
        "ON v.lineage_id = l.id WHERE l.id = ANY($1)", [out.lineage_id, later.lineage_id])
    assert {tuple(r) for r in statuses} == {("paused", "rejected")}
    assert uuid.UUID(str(review.registry_id))


async def test_lineage_busy_during_registry_approval_follows_on_its_next_batch(
        pool, batches, unique):
    a = await add_device(pool, unique, "a", policy=PROJECT)
    b = await add_device(pool, unique, "b")
    pipe = IngestPipeline(pool)
    fb = batches()
    await pipe.handle(rows_topic(a), insert(batches(), 1, "a"))
    out_b = await pipe.handle(rows_topic(b), insert(fb, 1, "b"))
    (review,) = await registry_reviews(pool, a.project_id)
    async with pool.acquire() as holder:
        tx = holder.transaction()
        await tx.start()
        await holder.execute("SELECT 1 FROM edge_table_lineages WHERE id = $1 FOR UPDATE",
                             out_b.lineage_id)
        await approve_registry(pool, review)  # skips b's lineage, held elsewhere
        await tx.rollback()
    assert await pool.fetchval("SELECT status FROM edge_table_lineages WHERE id = $1",
                               out_b.lineage_id) == "paused"
    nxt = await pipe.handle(rows_topic(b), fb.payload(
        fb.rows(("insert", {"id": 2, "mode": "b2", "setpoint": 2.0}))))
    assert nxt.status is OutcomeStatus.MATERIALIZED
    await Replayer(pool).drain_pending()
    rows = await target_rows(pool, out_b.lineage_id, "device_id, id")
    assert sorted(rows) == sorted([(a.device_id, 1), (b.device_id, 1), (b.device_id, 2)])
