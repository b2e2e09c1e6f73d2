"""One write path (``ingest._write``): the same batch — a row PostgreSQL refuses and a
device change that loses to a newer cloud write — written live and by replay ends the
same way: the same rows in the target, the same row quarantined, the same ledger count,
lineage counters and conflict resend, and the same per-batch result of the write path."""

from __future__ import annotations

from typing import Any

import asyncpg
from kits.review_helpers import approve

from edgesync import control, fleet, governance
from edgesync.ingest import IngestPipeline, OutcomeStatus, Replayer, _accept, _replay
from edgesync.ingest._write import Written, write_claimed
from edgesync.materialize import quote_ident


def spy(monkeypatch: Any, where: Any) -> list[Written]:
    """Every batch's result of ``write_claimed`` as called from ``where``."""
    seen: list[Written] = []

    async def wrapper(*args: Any, **kw: Any) -> list[Written]:
        out = await write_claimed(*args, **kw)
        seen.extend(out)
        return out

    monkeypatch.setattr(where, "write_claimed", wrapper)
    return seen


async def scenario(pool: asyncpg.Pool, batches: Any, unique: str, *, replay: bool,
                   monkeypatch: Any) -> dict[str, Any]:
    async with pool.acquire() as conn:
        scope = await fleet.add_device(conn, project=f"wp-{unique}", name=f"gw-{unique}",
                                          topic_slug=f"wp-{unique}")
    pipe = IngestPipeline(pool)
    topic = f"{scope.root_topic}/sync/rows/batch"
    f = batches()
    seed = await pipe.handle(topic, f.payload(f.rows(
        ("insert", {"id": 1, "mode": "heat", "setpoint": 20.0}),
        ("insert", {"id": 2, "mode": "heat", "setpoint": 20.0}),
        ("insert", {"id": 3, "mode": "heat", "setpoint": 20.0}))))
    lineage_id = seed.lineage_id
    await approve(pool, lineage_id, sync_authority="cloud_authoritative")
    await Replayer(pool).drain_pending()
    async with pool.acquire() as conn:
        # A newer cloud version of key 1: the device's change below has not seen it.
        await control.write_state_rows(conn, project_id=scope.project_id,
                                       device_id=scope.device_id, lineage_id=lineage_id,
                                       rows=[{"pk": {"id": 1}, "values": {"mode": "cloud"}}])
    table = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                lineage_id)
    # An operator narrowed a column: key 2's new value no longer fits.
    await pool.execute(f"ALTER TABLE {quote_ident(table)} ALTER COLUMN mode TYPE varchar(8)")
    payload = f.payload(f.rows(("update", {"id": 1, "mode": "stale", "setpoint": 1.0}),
                               ("update", {"id": 2, "mode": "far-too-long-for-8",
                                           "setpoint": 2.0}),
                               ("update", {"id": 3, "mode": "cool", "setpoint": 3.0})),
                        with_schema=False)
    if replay:
        async with pool.acquire() as conn, conn.transaction():
            lineage = await governance.get_lineage_for_update(conn, lineage_id)
            assert lineage is not None
            await governance.pause_lineage(conn, lineage, governance.PauseReason.BACKPRESSURE)
        outcome = await pipe.handle(topic, payload)
        assert (outcome.status, outcome.code) == (OutcomeStatus.STAGED, "lineage_paused")
        results = spy(monkeypatch, _replay)
        async with pool.acquire() as conn:
            assert await control.sweep_backpressure(conn) == 1  # resumed: replay scheduled
        assert await Replayer(pool).drain_pending() == 2
    else:
        results = spy(monkeypatch, _accept)
        outcome = await pipe.handle(topic, payload)
        assert (outcome.status, outcome.detail) == (OutcomeStatus.MATERIALIZED,
                                                    "1 row(s) quarantined")
    monkeypatch.undo()
    rows = await pool.fetch(f"SELECT id, mode, setpoint, _edge_cloud_version FROM "
                            f"{quote_ident(table)} WHERE device_id = $1 ORDER BY id",
                            scope.device_id)
    quarantined = await pool.fetch(
        "SELECT q.reason_code, q.op, q.status, q.row_json, q.pk_hash "
        "FROM edge_quarantined_rows q JOIN edge_export_segments s ON s.id = q.segment_id "
        "WHERE q.lineage_id = $1 AND s.batch_id = q.batch_id", lineage_id)
    ledger = await pool.fetch(
        "SELECT outcome, row_count, quarantined_rows FROM edge_export_segments "
        "WHERE lineage_id = $1 ORDER BY id", lineage_id)
    counters = await pool.fetchrow(
        "SELECT status, materialized_rows, materialization_errors, staged_rows "
        "FROM edge_table_lineages WHERE id = $1", lineage_id)
    resent = await pool.fetch(
        "SELECT body FROM edge_pending_controls WHERE lineage_id = $1 "
        "AND control_kind = 'state_write' ORDER BY created_at", lineage_id)
    events = await pool.fetch(
        "SELECT body FROM edge_events WHERE subject_id = $1 AND event_type = $2",
        lineage_id, governance.EventType.ROWS_QUARANTINED)
    return {
        "results": results,
        "rows": [tuple(r) for r in rows],
        "quarantined": [tuple(q) for q in quarantined],
        # The ledger records how a batch was taken in when it arrived (materialized, or
        # staged and replayed later); what became of its rows is counted the same way.
        "ledger": [tuple(r)[1:] for r in ledger],
        "counters": dict(counters),
        "resent": [r["body"]["rows"] for r in resent],
        "events": [(e["body"]["rows"], e["body"]["reason_code"]) for e in events],
    }


async def test_a_batch_written_live_and_by_replay_ends_the_same(pool, batches, unique,
                                                                monkeypatch):
    live = await scenario(pool, batches, unique + "l", replay=False, monkeypatch=monkeypatch)
    replayed = await scenario(pool, batches, unique + "r", replay=True,
                              monkeypatch=monkeypatch)
    assert live == replayed
    assert live["results"] == [Written(rows=2, quarantined=1,
                                       detail="1 row(s) quarantined")]
    # Key 1 keeps the cloud's row (sent to the device again), key 2 its old value.
    assert live["rows"] == [(1, "cloud", 20.0, 1), (2, "heat", 20.0, None),
                            (3, "cool", 3.0, None)]
    assert [q[:3] for q in live["quarantined"]] == [("22001", "update", "open")]
    assert '"mode":"far-too-long-for-8"' in live["quarantined"][0][3]
    assert live["ledger"] == [(3, 0), (3, 1)]
    assert live["counters"] == {"status": "active", "materialized_rows": 3 + 2,
                                "materialization_errors": 0, "staged_rows": 0}
    assert live["resent"][-1] == [{"pk": {"id": 1}, "values": {"mode": "cloud",
                                                               "setpoint": 20.0},
                                   "cloud_version": 1}]
    assert live["events"] == [(1, "22001")]
