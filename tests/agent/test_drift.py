"""Snapshot on first run, schema drift while running, local_retention_bytes."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import make_config, next_message, observer

from edgesync.agent import Agent


def test_snapshot_on_first_run_seeds_existing_rows_once(app: sqlite3.Connection,
                                                        capture: Any) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    app.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"v{i}") for i in range(1, 4)])
    cap = capture(snapshot=True)
    assert cap.installed.snapshotted == ("t",)
    assert [(op, pk) for _, _, op, pk, _ in cap.journal()] == [
        ("insert", {"id": 1}), ("insert", {"id": 2}), ("insert", {"id": 3})]
    app.execute("UPDATE t SET v = 'new' WHERE id = 2")
    cap2 = capture(snapshot=True)  # restart: not seeded again
    assert cap2.installed.snapshotted == ()
    assert [op for _, _, op in cap2.ops()] == ["insert", "insert", "insert", "update"]
    # a table created later is "first seen" then: its rows (CREATE TABLE AS) are seeded
    app.execute("CREATE TABLE u (id INTEGER PRIMARY KEY, v TEXT)")
    app.execute("INSERT INTO u SELECT * FROM t")
    cap3 = capture(snapshot=True)
    assert cap3.installed.snapshotted == ("u",)


def test_without_snapshot_existing_rows_are_not_journaled(app: sqlite3.Connection,
                                                          capture: Any) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    app.execute("INSERT INTO t VALUES (1)")
    cap = capture()
    assert cap.ops() == []
    assert capture(snapshot=True).installed.snapshotted == ()  # t was seen already


async def test_schema_drift_while_running(app: sqlite3.Connection, source_db: Path,
                                          tmp_path: Path, device_id: str,
                                          caplog: pytest.LogCaptureFixture) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    cfg = make_config(device_id, source_db, tmp_path)
    root = cfg.connection.root_topic
    async with observer(device_id) as obs, Agent(cfg) as agent:
        await obs.subscribe(f"{root}/sync/#", qos=1)
        assert await agent.flush() == 0
        first = await next_message(obs, f"{root}/sync/schema/observe")
        assert set(first) == {"format_version", "source_table", "schema_hash", "observed_at"}
        assert first["source_table"] == "t" and first["observed_at"].endswith("Z")

        app.execute("ALTER TABLE t ADD COLUMN w INTEGER")
        app.execute("INSERT INTO t VALUES (1, 'a', 7)")
        assert await agent.flush() == 1
        second = await next_message(obs, f"{root}/sync/schema/observe")
        assert second["schema_hash"] != first["schema_hash"]
        batch = await next_message(obs, f"{root}/sync/rows/batch")
        assert batch["schema_hash"] == second["schema_hash"]
        assert {c["name"] for c in batch["schema_columns"]["columns"]} == {"id", "v", "w"}

        # A rebuild the way migration tools do it drops the triggers with the old table;
        # the application keeps writing before the agent's next flush.
        with caplog.at_level(logging.WARNING, logger="edgesync.agent"):
            app.executescript("""
                BEGIN;
                CREATE TABLE t_new (id INTEGER PRIMARY KEY, v TEXT NOT NULL, w INTEGER);
                INSERT INTO t_new SELECT id, coalesce(v, ''), w FROM t;
                DROP TABLE t;
                ALTER TABLE t_new RENAME TO t;
                COMMIT;
            """)
            app.execute("INSERT INTO t VALUES (2, 'b', 8)")  # no trigger yet
            assert await agent.flush() == 2  # both rows re-journaled from the table
        assert "had lost its triggers" in caplog.text
        third = await next_message(obs, f"{root}/sync/schema/observe")
        assert third["schema_hash"] not in (first["schema_hash"], second["schema_hash"])
        batch = await next_message(obs, f"{root}/sync/rows/batch")
        assert sorted(r["row"]["id"] for r in batch["rows"]) == [1, 2]
        app.execute("INSERT INTO t VALUES (3, 'c', 9)")  # triggers are back
        assert await agent.flush() == 1


async def test_retention_drops_oldest_and_reports_the_gap(
        app: sqlite3.Connection, source_db: Path, tmp_path: Path, device_id: str,
        caplog: pytest.LogCaptureFixture) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    cfg = make_config(device_id, source_db, tmp_path, local_retention_bytes=4000)
    root = cfg.connection.root_topic
    async with observer(device_id) as obs, Agent(cfg) as agent:
        await obs.subscribe(f"{root}/sync/#", qos=1)
        app.executemany("INSERT INTO t VALUES (?, 'x')", [(i,) for i in range(1, 201)])
        with caplog.at_level(logging.ERROR, logger="edgesync.agent"):
            sent = await agent.flush()
        assert "over local_retention_bytes" in caplog.text
        report = await next_message(obs, f"{root}/sync/ingest/request")
        assert report["format_version"] == 1 and report["request_kind"] == "gap_report"
        assert report["source_table"] == "t" and report["first_commit_seq"] == 1
        last = report["last_commit_seq"]
        batch = await next_message(obs, f"{root}/sync/rows/batch")
        assert batch["journal_epoch"] == report["journal_epoch"]
        assert batch["first_commit_seq"] == last + 1 and sent == 200 - last
        remaining = app.execute("SELECT min(commit_seq), count(*) FROM __edgesync_journal "
                                "WHERE commit_seq <= 200").fetchone()
        assert remaining == (last + 1, 200 - last)
        # after the report, the table's rows are journaled again for a bootstrap upload
        reseed = await next_message(obs, f"{root}/sync/ingest/request")
        assert reseed == {"format_version": 1, "request_kind": "url_request",
                          "source_table": "t", "segment_kind": "bootstrap_snapshot"}
        assert app.execute("SELECT count(*) FROM __edgesync_journal WHERE commit_seq > 200"
                           ).fetchone() == (200,)
        # carries on: new rows still flow
        app.execute("INSERT INTO t VALUES (1000, 'y')")
        assert await agent.flush() == 1
    with sqlite3.connect(tmp_path / "state.db") as db:
        assert db.execute("SELECT source_table, first_commit_seq, last_commit_seq, reported "
                          "FROM gaps").fetchall() == [("t", 1, last, 1)]
    db.close()
