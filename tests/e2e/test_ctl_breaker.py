"""The materialization circuit breaker end to end: after approval the target drifts from
its bindings (a mirrored column renamed in PostgreSQL: a failure of the whole lineage,
not of a row's data, which would be quarantined instead); five failing batches open the
breaker, pause the lineage and reach the device as pause_lineage; after the column is
renamed back, reset_materialization resumes everything and the cloud equals SQLite."""

from __future__ import annotations

from pathlib import Path

import pytest
from control_kit import (
    control_status,
    device_paused,
    device_resumed,
    journal_count,
    journal_drained,
    pending_controls,
)
from kits.e2e_kit import (
    app,
    approve,
    cloud,
    eventually,
    lineage,
    pool_of,
    register,
    running_agent,
    target_of,
    wait_equal,
    wait_lineage,
)

from edgesync.control import reset_materialization
from edgesync.materialize import quote_ident
from edgesync.staging import requeue_failed

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

COLS = ["id", "v", "score"]


async def test_poisoned_target_trips_the_breaker_and_reset_drains(
        tmp_path: Path, database_url: str, mqtt_url: str, unique: str) -> None:
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag="brk")
        app(dev.db, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT, score INTEGER)")
        async with running_agent(dev):
            app(dev.db, ("INSERT INTO t VALUES (?, ?, ?)", [(i, f"v{i}", i) for i in range(1, 11)]))
            await approve(pool, dev, "t")
            await wait_equal(pool, dev, "t", COLS)
            target = await target_of(pool, dev, "t")
            await pool.execute(f"ALTER TABLE {quote_ident(target)} RENAME COLUMN score "
                               "TO poison")

            # Five batches the target refuses (one per flush): the breaker opens.
            for k in range(5):
                app(dev.db, f"INSERT INTO t VALUES ({100 + k}, 'bad', {5000 + k})")
                await wait_lineage(pool, dev, "t",
                                   lambda r, k=k: r["materialization_errors"] >= k + 1,
                                   f"failure {k + 1} counted")
            rec = await wait_lineage(pool, dev, "t", lambda r: r["status"] == "paused",
                                     "breaker open")
            assert rec["pause_reason"] == "circuit_breaker" and rec["paused_by_control"]
            assert '"score"' in rec["last_error"]
            (pause,) = await pending_controls(pool, dev, "pause_lineage")
            await eventually(lambda: device_paused(dev.state_db, "t"), what="device paused")
            await eventually(lambda: control_status(pool, pause["id"], "acked"),
                             what="pause acked")

            # The device keeps journaling while paused.
            app(dev.db, ("INSERT INTO t VALUES (?, ?, ?)",
                         [(i, f"later{i}", i) for i in range(200, 230)]),
                "UPDATE t SET v = 'edited' WHERE id < 5", "DELETE FROM t WHERE id = 10")
            assert journal_count(dev.db, "t") >= 30

            # Fix the cause, reset: failed batches are requeued, the device resumes.
            await pool.execute(f"ALTER TABLE {quote_ident(target)} RENAME COLUMN poison "
                               "TO score")
            async with pool.acquire() as conn, conn.transaction():
                await reset_materialization(conn, rec["id"])
                requeued = await requeue_failed(conn, rec["id"])
            assert requeued >= 5
            await eventually(lambda: device_resumed(dev.state_db, "t"), what="device resumed")
            rows = await wait_equal(pool, dev, "t", COLS)
            assert len(rows) == 10 + 5 + 30 - 1
            rec = await lineage(pool, dev, "t")
            assert rec is not None
            assert (rec["status"], rec["materialization_errors"], rec["staged_rows"]) == (
                "active", 0, 0)
            (resume,) = await pending_controls(pool, dev, "resume_lineage")
            await eventually(lambda: control_status(pool, resume["id"], "acked"),
                             what="resume acked")
            await eventually(lambda: journal_drained(dev.db), what="journal emptied")
