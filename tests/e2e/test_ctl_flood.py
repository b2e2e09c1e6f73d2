"""Volume backpressure end to end (real Mosquitto, PostgreSQL, agent and server): one
table floods past the project's cap while under review; the device is paused, keeps
journaling, and another table of the same device keeps flowing; approval drains the
backlog, the sweep resumes the device below 80 % and it drains its buffer."""

from __future__ import annotations

from pathlib import Path

import pytest
from control_kit import (
    agent_table_state,
    control_status,
    device_paused,
    device_resumed,
    journal_count,
    journal_drained,
    pending_controls,
)
from kits.e2e_kit import (
    Wire,
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

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

COLS = ["id", "v", "n"]


def rows(table: str, ids: range) -> tuple[str, list[tuple[int, str, int]]]:
    return (f"INSERT INTO {table} VALUES (?, ?, ?)", [(i, f"{table}{i}", i * 3) for i in ids])


async def test_flooded_table_pauses_device_while_other_table_flows(
        tmp_path: Path, database_url: str, mqtt_url: str, unique: str) -> None:
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag="flood",
                             policy={"max_pending_rows_per_lineage": 50,
                                     "resume_threshold_percent": 80})
        app(dev.db, "CREATE TABLE a (id INTEGER PRIMARY KEY, v TEXT, n INTEGER)",
            "CREATE TABLE b (id INTEGER PRIMARY KEY, v TEXT, n INTEGER)")
        async with Wire(mqtt_url, dev.root, unique) as wire, running_agent(dev):
            app(dev.db, rows("a", range(1, 6)), rows("b", range(1, 6)))
            await approve(pool, dev, "b")
            await wait_equal(pool, dev, "b", COLS)
            await wait_lineage(pool, dev, "a", lambda r: r["staged_rows"] == 5,
                               "5 rows staged under review")

            # Flood a past the cap (50 staged rows): the cloud pauses the device.
            app(dev.db, rows("a", range(6, 106)))
            rec = await wait_lineage(pool, dev, "a", lambda r: r["paused_by_control"],
                                     "paused by backpressure")
            assert (rec["status"], rec["pause_reason"]) == ("paused", "backpressure")
            await eventually(lambda: device_paused(dev.state_db, "a"), what="device paused a")
            (pause,) = await pending_controls(pool, dev, "pause_lineage")
            await eventually(lambda: control_status(pool, pause["id"], "acked"),
                             what="pause acked")
            assert pause["body"]["server_watermark"] >= 1
            assert agent_table_state(dev.state_db, "a")["server_watermark"] == \
                pause["body"]["server_watermark"]

            # Paused: a is journaled, not published; b keeps flowing and materializing.
            sent_a = len(wire.batches("a"))
            staged = (await lineage(pool, dev, "a"))["staged_rows"]  # type: ignore[index]
            for k in range(4):
                app(dev.db, rows("a", range(200 + k * 50, 250 + k * 50)),
                    rows("b", range(10 + k * 10, 20 + k * 10)),
                    "UPDATE b SET n = n + 1 WHERE id % 3 = 0")
                await wait_equal(pool, dev, "b", COLS)
            app(dev.db, "DELETE FROM b WHERE id % 4 = 0", "UPDATE a SET v = 'x' WHERE id < 4")
            await wait_equal(pool, dev, "b", COLS)
            assert len(wire.batches("a")) == sent_a, "a was published while paused"
            assert (await lineage(pool, dev, "a"))["staged_rows"] == staged  # type: ignore[index]
            assert journal_count(dev.db, "a") >= 200  # the journal is the buffer

            # Approval replays the backlog; the sweep resumes below 80 % of the cap.
            await approve(pool, dev, "a")
            rec = await wait_lineage(pool, dev, "a", lambda r: r["status"] == "active",
                                     "resumed", limit=40)
            assert rec["paused_by_control"] is False and rec["pause_reason"] is None
            (resume,) = await pending_controls(pool, dev, "resume_lineage")
            assert resume["body"]["server_watermark"] >= pause["body"]["server_watermark"]
            await eventually(lambda: device_resumed(dev.state_db, "a"), what="device resumed a")
            await eventually(lambda: control_status(pool, resume["id"], "acked"),
                             what="resume acked")

            # The device drains its buffer; both tables equal SQLite row for row.
            a = await wait_equal(pool, dev, "a", COLS, limit=50)
            b = await wait_equal(pool, dev, "b", COLS)
            assert len(a) == 5 + 100 + 200 and len(b) == 34
            assert len(wire.controls("resume_lineage")) >= 1
            app(dev.db, rows("a", range(1000, 1010)))
            await wait_equal(pool, dev, "a", COLS)
            await eventually(lambda: journal_drained(dev.db), what="journal emptied",
                             limit=30)
