"""No dead end after deleting a lineage, end to end (real agent, Mosquitto, PostgreSQL,
``edgesync serve``): a table whose lineage the volume cap paused on the device keeps
journaling; deleting the lineage sends ``forget_lineage``, the device resumes and
starts the table over (schema again, every current row again), the next batch
re-creates the lineage, and once approved it equals SQLite — changes made while the
device was paused included."""

from __future__ import annotations

from pathlib import Path

import pytest
from control_kit import control_status, device_paused, journal_drained, pending_controls
from kits.e2e_kit import (
    app,
    approve,
    cloud,
    eventually,
    lineage,
    pool_of,
    register,
    running_agent,
    wait_equal,
    wait_lineage,
)

from edgesync.operations import delete_lineage

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

COLS = ["id", "v"]
POLICY = {"max_pending_rows_per_lineage": 5}  # the first batch (20 rows) pauses the device


async def test_delete_lineage_resumes_the_device_and_the_lineage_comes_back_complete(
        tmp_path: Path, database_url: str, mqtt_url: str, unique: str) -> None:
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag="fgt", policy=POLICY)
        app(dev.db, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        async with running_agent(dev):
            app(dev.db, ("INSERT INTO t VALUES (?, ?)", [(i, f"v{i}") for i in range(1, 21)]))
            old = await wait_lineage(pool, dev, "t", lambda r: r["paused_by_control"],
                                     "paused by the volume cap")
            assert old["pause_reason"] == "backpressure"
            await eventually(lambda: device_paused(dev.state_db, "t"), what="device paused")
            # Stranded before the fix: paused for ever, the journal growing.
            app(dev.db, ("INSERT INTO t VALUES (?, ?)", [(i, f"late{i}") for i in range(21, 31)]),
                "UPDATE t SET v = 'edited' WHERE id <= 5", "DELETE FROM t WHERE id = 7")

            async with pool.acquire() as conn, conn.transaction():
                await delete_lineage(conn, old["id"])
            (forget,) = await pending_controls(pool, dev, "forget_lineage")
            assert forget["body"]["source_table"] == "t"
            await eventually(lambda: control_status(pool, forget["id"], "acked"),
                             what="forget_lineage acked")

            # The next batch re-creates the lineage, schema and all: a queued review.
            new = await wait_lineage(pool, dev, "t", lambda r: r["id"] != old["id"],
                                     "lineage re-created")
            assert new["current_schema_hash"] == old["current_schema_hash"]
            # Room for the whole table staged under review this time.
            await pool.execute("UPDATE edge_projects SET policy = '{}' WHERE id = $1",
                               dev.scope.project_id)
            await approve(pool, dev, "t")
            rows = await wait_equal(pool, dev, "t", COLS)
            assert len(rows) == 29 and (5, "edited") in rows and (30, "late30") in rows
            rec = await wait_lineage(pool, dev, "t", lambda r: r["status"] == "active",
                                     "active again")
            assert rec["id"] == new["id"] and rec["staged_rows"] == 0
            await eventually(lambda: journal_drained(dev.db), what="journal emptied")
            assert (await lineage(pool, dev, "t"))["paused_by_control"] is False
