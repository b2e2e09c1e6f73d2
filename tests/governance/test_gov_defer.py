"""``defer``: an approval with undecided columns keeps the lineage paused and staging;
a reopened review decides them and replays."""

from __future__ import annotations

import pytest
from governance_helpers import add_device, rows_topic, target_rows
from kits.review_helpers import approve

from edgesync import governance
from edgesync.errors import ConflictError
from edgesync.ingest import IngestPipeline, OutcomeStatus, Replayer


async def test_defer_keeps_the_lineage_paused_until_a_reopened_review(pool, batches, unique):
    dev = await add_device(pool, unique, "gw")
    pipe = IngestPipeline(pool)
    f = batches()
    first = await pipe.handle(rows_topic(dev), f.payload(
        f.rows(("insert", {"id": 1, "mode": "a", "setpoint": 1.0}))))
    lineage_id = first.lineage_id
    approved = await approve(pool, lineage_id, [
        {"source_column_name": "id", "action": "mirror"},
        {"source_column_name": "mode", "action": "mirror"},
        {"source_column_name": "setpoint", "action": "defer"}])
    assert approved.status == "approved"
    row = await pool.fetchrow("SELECT status, pause_reason, staged_rows FROM "
                              "edge_table_lineages WHERE id = $1", lineage_id)
    assert tuple(row) == ("paused", "deferred_columns", 1)
    assert await Replayer(pool).drain_pending(project_id=dev.project_id) == 0
    more = await pipe.handle(rows_topic(dev), f.payload(
        f.rows(("update", {"id": 1, "mode": "b", "setpoint": 2.0}))))
    assert (more.status, more.code) == (OutcomeStatus.STAGED, "lineage_paused")
    assert await target_rows(pool, lineage_id, "id") == []

    async with pool.acquire() as conn:
        reopened = await governance.reopen_review(conn, lineage_id, actor="t")
        with pytest.raises(ConflictError, match="open review"):
            await governance.reopen_review(conn, lineage_id, actor="t")
    assert reopened.status == "queued"
    await approve(pool, lineage_id)  # mirror every column
    assert await Replayer(pool).drain_pending(project_id=dev.project_id) == 2
    assert await target_rows(pool, lineage_id, "id, mode, setpoint") == [(1, "b", 2.0)]
    row = await pool.fetchrow("SELECT status, pause_reason FROM edge_table_lineages "
                              "WHERE id = $1", lineage_id)
    assert tuple(row) == ("active", None)
    async with pool.acquire() as conn:
        with pytest.raises(ConflictError, match="no deferred"):
            await governance.reopen_review(conn, lineage_id, actor="t")
