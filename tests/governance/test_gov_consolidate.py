"""Consolidation: device-scoped lineages (mode none) moved into the coalesced target once
the project coalesces and the registry has approved their schema."""

from __future__ import annotations

import uuid

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
from edgesync.errors import ConflictError
from edgesync.ingest import IngestPipeline, OutcomeStatus, Replayer
from edgesync.materialize import quote_ident


async def set_mode(pool, project_id: uuid.UUID, mode: str) -> None:
    await pool.execute("UPDATE edge_projects SET policy = policy || $2 WHERE id = $1",
                       project_id, {"schema_coalescing_mode": mode})


async def approve_registry(pool, project_id: uuid.UUID, actions=None) -> dict:
    async with pool.acquire() as conn:
        (review,) = await governance.list_registry_reviews(conn, project_id, status="queued")
        claimed = await governance.claim_registry_review(
            conn, review.id, actor="t", action_version=review.action_version)
        return await governance.approve_registry_review(
            conn, review.id, actor="t", action_version=claimed.action_version,
            column_actions=actions)


async def run_consolidate(pool, project_id: uuid.UUID, table: str,
                          **kw) -> governance.Consolidation:
    async with pool.acquire() as conn:
        return await governance.consolidate(conn, project_id, table, actor="op", **kw)


async def test_consolidate_moves_device_tables_into_the_coalesced_table(
        pool, batches, unique):
    a = await add_device(pool, unique, "a")
    b = await add_device(pool, unique, "b")
    pipe = IngestPipeline(pool)
    fa, fb = batches(), batches()
    out_a = await pipe.handle(rows_topic(a), fa.payload(fa.rows(
        ("insert", {"id": 1, "mode": "a1", "setpoint": 1.0}),
        ("insert", {"id": 2, "mode": "a2", "setpoint": 2.0}))))
    out_b = await pipe.handle(rows_topic(b), fb.payload(fb.rows(
        ("insert", {"id": 1, "mode": "b1", "setpoint": 1.5}))))
    await approve(pool, out_a.lineage_id, [
        {"source_column_name": "id", "action": "mirror"},
        {"source_column_name": "mode", "action": "mirror", "mirror_column_name": "hvac"},
        {"source_column_name": "setpoint", "action": "mirror"}])
    await approve(pool, out_b.lineage_id)
    await Replayer(pool).drain_pending(project_id=a.project_id)
    deleted = await pipe.handle(rows_topic(a), fa.payload(fa.rows(("delete", {"id": 2}))))
    assert deleted.status is OutcomeStatus.MATERIALIZED
    old_a = f"edge_state_{a.device_id.hex[:8]}_device_state"
    old_b = f"edge_state_{b.device_id.hex[:8]}_device_state"

    with pytest.raises(ConflictError, match="schema_coalescing_mode"):
        await run_consolidate(pool, a.project_id, "device_state")
    await set_mode(pool, a.project_id, "project")
    with pytest.raises(ConflictError, match="no approved registry entry"):
        await run_consolidate(pool, a.project_id, "device_state")

    # A new device opens the registry review; approving it provisions the coalesced table.
    pipe = IngestPipeline(pool)  # a fresh device-scope cache: the policy changed
    c = await add_device(pool, unique, "c")
    fc = batches()
    out_c = await pipe.handle(rows_topic(c), fc.payload(fc.rows(
        ("insert", {"id": 5, "mode": "c5", "setpoint": 5.0}))))
    assert (out_c.status, out_c.code) == (OutcomeStatus.STAGED, "schema_review")
    await approve_registry(pool, a.project_id)
    await Replayer(pool).drain_pending(project_id=a.project_id)
    table = f"edge_state_p{a.project_id.hex[:8]}_device_state"

    done = await run_consolidate(pool, a.project_id, "device_state")
    assert done.skipped == ()
    by_lineage = {d.lineage_id: d for d in done.consolidated}
    assert set(by_lineage) == {out_a.lineage_id, out_b.lineage_id}
    got_a, got_b = by_lineage[out_a.lineage_id], by_lineage[out_b.lineage_id]
    assert (got_a.from_table, got_a.to_table, got_a.old_table_kept,
            got_a.rows_copied, got_a.tombstones_copied) == (old_a, table, old_a, 1, 1)
    assert (got_b.from_table, got_b.rows_copied, got_b.tombstones_copied) == (
        old_b, 1, 0)
    rows = await pool.fetch(f"SELECT device_id, id, mode, _edge_deleted, _edge_commit_seq "
                            f"FROM {quote_ident(table)}")
    assert sorted(tuple(r) for r in rows) == sorted([
        (a.device_id, 1, "a1", False, 1), (a.device_id, 2, None, True, 3),
        (b.device_id, 1, "b1", False, 1), (c.device_id, 5, "c5", False, 1)])
    lineages = await pool.fetch("SELECT target_table, status FROM edge_table_lineages "
                                "WHERE id = ANY($1)", [out_a.lineage_id, out_b.lineage_id])
    assert {tuple(r) for r in lineages} == {(table, "active")}
    bindings = await pool.fetch(
        "SELECT source_column_name, mirror_column_name FROM edge_column_bindings "
        "WHERE lineage_id = $1 ORDER BY source_column_name", out_a.lineage_id)
    assert [tuple(r) for r in bindings] == [("id", "id"), ("mode", "mode"),
                                            ("setpoint", "setpoint")]  # the registry's
    # The old tables are kept, untouched.
    assert await pool.fetchval(f"SELECT count(*) FROM {quote_ident(old_a)}") == 2
    assert await pool.fetchval(f"SELECT count(*) FROM {quote_ident(old_b)}") == 1

    # Later live batches of both devices land in the coalesced table.
    live_a = await pipe.handle(rows_topic(a), fa.payload(fa.rows(
        ("update", {"id": 1, "mode": "a1b", "setpoint": 1.0}))))
    live_b = await pipe.handle(rows_topic(b), fb.payload(fb.rows(
        ("insert", {"id": 3, "mode": "b3", "setpoint": 3.0}))))
    assert live_a.status is live_b.status is OutcomeStatus.MATERIALIZED
    rows = await target_rows(pool, out_a.lineage_id, "device_id, id, mode")
    assert sorted(rows, key=str) == sorted([
        (a.device_id, 1, "a1b"), (a.device_id, 2, None), (b.device_id, 1, "b1"),
        (b.device_id, 3, "b3"), (c.device_id, 5, "c5")], key=str)
    assert await pool.fetchval(f"SELECT hvac FROM {quote_ident(old_a)} WHERE id = 1") == "a1"

    # A second call changes nothing.
    before = await pool.fetchval("SELECT count(*) FROM edge_events WHERE project_id = $1",
                                 a.project_id)
    again = await run_consolidate(pool, a.project_id, "device_state")
    assert (again.consolidated, again.skipped) == ((), ())
    assert await pool.fetchval("SELECT count(*) FROM edge_events WHERE project_id = $1",
                               a.project_id) == before
    events = await pool.fetch("SELECT subject_id, body FROM edge_events WHERE project_id = $1 "
                              "AND event_type = $2", a.project_id, governance.CONSOLIDATED_EVENT)
    assert {e["subject_id"] for e in events} == {out_a.lineage_id, out_b.lineage_id}
    async with pool.acquire() as conn:
        (mirror,) = await governance.list_coalesced_mirrors(conn, a.project_id)
        (entry,) = await governance.list_registry_entries(conn, a.project_id)
        detail = await governance.get_registry_entry(conn, a.project_id, entry.id)
    assert mirror.device_count == 3
    assert {d.device_id for d in detail.devices} == {a.device_id, b.device_id,
                                                           c.device_id}


async def test_newer_row_in_coalesced_table_wins_and_other_schema_is_skipped(
        pool, batches, unique):
    a = await add_device(pool, unique, "a")
    odd = await add_device(pool, unique, "odd")
    pipe = IngestPipeline(pool)
    fa = batches()
    fo = batches(columns=[("id", "INTEGER", 1, True), ("mode", "TEXT", 0, True)])
    out_a = await pipe.handle(rows_topic(a), fa.payload(fa.rows(
        ("insert", {"id": 1, "mode": "old", "setpoint": 1.0}))))
    out_o = await pipe.handle(rows_topic(odd), fo.payload(fo.rows(
        ("insert", {"id": 1, "mode": "x"}))))
    await approve(pool, out_a.lineage_id)
    await approve(pool, out_o.lineage_id)
    await Replayer(pool).drain_pending(project_id=a.project_id)
    await set_mode(pool, a.project_id, "project")
    pipe = IngestPipeline(pool)
    fc = batches()
    await pipe.handle(rows_topic(await add_device(pool, unique, "c")), fc.payload(fc.rows(
        ("insert", {"id": 9, "mode": "c", "setpoint": 0.0}))))
    await approve_registry(pool, a.project_id)
    table = f"edge_state_p{a.project_id.hex[:8]}_device_state"
    # The coalesced table already holds a newer change of a's row (same epoch, seq 7).
    await pool.execute(
        f"INSERT INTO {quote_ident(table)} (device_id, _edge_pk_hash, _edge_journal_epoch, "
        "_edge_commit_seq, _edge_deleted, id, mode) SELECT device_id, _edge_pk_hash, "
        f"_edge_journal_epoch, 7, false, id, 'newer' FROM "
        f"{quote_ident(f'edge_state_{a.device_id.hex[:8]}_device_state')}")

    done = await run_consolidate(pool, a.project_id, "device_state")
    ((moved,), (skipped,)) = done.consolidated, done.skipped
    assert (moved.lineage_id, moved.rows_copied) == (out_a.lineage_id, 0)
    assert (skipped.lineage_id, skipped.reason) == (out_o.lineage_id,
                                                          "schema_not_in_registry")
    assert fo.schema_hash in skipped.detail
    assert await pool.fetchval(f"SELECT mode FROM {quote_ident(table)} WHERE device_id = $1",
                               a.device_id) == "newer"
    target = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                 out_o.lineage_id)
    assert target == f"edge_state_{odd.device_id.hex[:8]}_device_state"
    # Skipped again (reported), nothing else happens.
    again = await run_consolidate(pool, a.project_id, "device_state")
    assert (again.consolidated, [s.reason for s in again.skipped]) == (
        (), ["schema_not_in_registry"])


async def test_fleet_telemetry_consolidation(pool, unique):
    d1 = await add_device(pool, unique, "t1", fleet="f")
    loner = await add_device(pool, unique, "t0")
    pipe = IngestPipeline(pool)
    outs, t1 = [], Telemetry()
    for d, t in ((d1, t1), (loner, Telemetry())):
        outs.append(await pipe.handle(tm_topic(d), t.samples((T0, 1.0))))
        await approve(pool, outs[-1].lineage_id)
    await Replayer(pool).drain_pending(project_id=d1.project_id)
    project_table = f"edge_ts_p{d1.project_id.hex[:8]}_temps"
    await set_mode(pool, d1.project_id, "fleet")
    pipe = IngestPipeline(pool)
    d2 = await add_device(pool, unique, "t2", fleet="f")
    await pipe.handle(tm_topic(d2), Telemetry().samples((T0, 2.0)))
    await approve_registry(pool, d1.project_id)
    await Replayer(pool).drain_pending(project_id=d1.project_id)
    fleet_table = f"edge_ts_f{d1.fleet_id.hex[:8]}_temps"

    done = await run_consolidate(pool, d1.project_id, "temps", fleet_id=d1.fleet_id)
    ((moved,),) = (done.consolidated,)
    assert (moved.lineage_id, moved.from_table, moved.to_table,
            moved.rows_copied) == (outs[0].lineage_id, project_table, fleet_table, 1)
    assert done.skipped == ()  # the loner is in no fleet: not in this fleet's scope
    later = await pipe.handle(tm_topic(d1), t1.samples((T0, 3.0)))
    assert later.status is OutcomeStatus.MATERIALIZED
    rows = await pool.fetch(f"SELECT device_id, value_c FROM {quote_ident(fleet_table)}")
    assert sorted((r["device_id"], r["value_c"]) for r in rows) == sorted(
        [(d1.device_id, 1.0), (d1.device_id, 3.0), (d2.device_id, 2.0)])
    # The project-wide table keeps its rows.
    assert await pool.fetchval(f"SELECT count(*) FROM {quote_ident(project_table)}") == 2

    # Without a fleet: every fleet of the project; the loner is reported.
    whole = await run_consolidate(pool, d1.project_id, "temps")
    assert whole.consolidated == ()
    assert [(s.device_id, s.reason) for s in whole.skipped] == [
        (loner.device_id, "device_in_no_fleet")]
