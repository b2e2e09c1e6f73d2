"""A rows table's journal backlog over ``upload_backlog_rows`` travels as one
``payload_spill`` upload (url_request → url_grant → PUT → finalize); smaller backlogs
go as MQTT batches."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_helpers import eventually, make_config, next_message, observer, send_control
from test_uploads import B1, UploadServer, grant

from edgesync.agent import Agent
from edgesync.agent.config import load_config


@pytest.fixture
def uploads() -> Iterator[UploadServer]:
    srv = UploadServer()
    yield srv
    srv.http.shutdown()
    srv.http.server_close()


def _state(tmp_path: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(tmp_path / "state.db") as db:
        rows = db.execute(sql).fetchall()
    db.close()
    return rows


def _journal(app: sqlite3.Connection) -> list[int]:
    return [r[0] for r in app.execute(
        "SELECT commit_seq FROM __edgesync_journal WHERE table_name='t' ORDER BY 1")]


async def test_a_backlog_over_the_threshold_goes_as_one_upload(
        app: sqlite3.Connection, source_db: Path, tmp_path: Path, device_id: str,
        uploads: UploadServer) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    cfg = make_config(device_id, source_db, tmp_path, upload_backlog_rows=100)
    root = cfg.connection.root_topic
    req = f"{root}/sync/ingest/request"
    async with observer(device_id) as obs, Agent(cfg) as agent:
        await obs.subscribe(f"{root}/sync/#", qos=1)
        app.executemany("INSERT INTO t VALUES (?, 'x')", [(i,) for i in range(1, 251)])
        app.execute("DELETE FROM t WHERE id = 7")  # a delete inside the backlog
        assert await agent.flush() == 0  # nothing over MQTT: the range is reserved
        assert await next_message(obs, req) == {
            "format_version": 1, "request_kind": "url_request", "source_table": "t",
            "segment_kind": "payload_spill"}
        assert _state(tmp_path, "SELECT segment_kind, first_commit_seq, last_commit_seq "
                                "FROM uploads") == [("payload_spill", 1, 251)]
        # rows journaled after the reserved range keep flowing as batches
        app.executemany("INSERT INTO t VALUES (?, 'y')", [(i,) for i in range(300, 305)])
        assert await agent.flush() == 5
        batch = await next_message(obs, f"{root}/sync/rows/batch")
        assert (batch["first_commit_seq"], batch["last_commit_seq"]) == (252, 256)
        await send_control(obs, root, grant(uploads, "g", B1, "payload_spill",
                                            "2999-01-01T00:00:00Z"))
        await next_message(obs, f"{root}/sync/ingest/ack")
        await agent.flush()
        assert await next_message(obs, req) == {
            "format_version": 1, "request_kind": "finalize", "source_table": "t",
            "batch_id": B1, "segment_kind": "payload_spill"}
        header, *rows = uploads.lines(B1)
        assert header["capture_strategy"] == "sqlite_row_batch_v1"
        assert {"journal_epoch", "schema_hash", "schema_columns"} <= set(header)
        # every row op of the range with its commit_seq, in order (id 7's insert is
        # left out: its row is gone, the delete carries it)
        assert [r["commit_seq"] for r in rows] == [*range(1, 7), *range(8, 252)]
        assert rows[-1] == {"commit_seq": 251, "op": "delete", "pk": {"id": 7},
                            "row": None}
        assert all(r["op"] == "insert" and r["row"]["v"] == "x" for r in rows[:-1])
        # the cloud ingests the object in chunks and confirms them: the range goes
        epoch = header["journal_epoch"]
        await send_control(obs, root, {
            "control_id": "p", "control_kind": "progress", "source_table": "t",
            "journal_epoch": epoch, "committed": [
                {"batch_id": "01960000-0000-7000-8000-00000000000a",
                 "first_commit_seq": 1, "last_commit_seq": 200},
                {"batch_id": "01960000-0000-7000-8000-00000000000b",
                 "first_commit_seq": 201, "last_commit_seq": 251}]})
        await next_message(obs, f"{root}/sync/ingest/ack")
        await eventually(lambda: _journal(app) == list(range(252, 257)))
        await agent.flush()  # settles the upload: every row it carried is committed
        assert _state(tmp_path, "SELECT count(*) FROM uploads") == [(0,)]
        assert _journal(app) == list(range(252, 257))


async def test_a_backlog_at_the_threshold_goes_as_batches(
        app: sqlite3.Connection, source_db: Path, tmp_path: Path, device_id: str) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    cfg = make_config(device_id, source_db, tmp_path, upload_backlog_rows=100)
    root = cfg.connection.root_topic
    async with observer(device_id) as obs, Agent(cfg) as agent:
        await obs.subscribe(f"{root}/sync/#", qos=1)
        app.executemany("INSERT INTO t VALUES (?, 'x')", [(i,) for i in range(1, 101)])
        assert await agent.flush() == 100
        batch = await next_message(obs, f"{root}/sync/rows/batch")
        assert (batch["first_commit_seq"], batch["last_commit_seq"]) == (1, 100)
        # the next backlog is over it again: only the new rows count
        app.executemany("INSERT INTO t VALUES (?, 'x')", [(i,) for i in range(101, 201)])
        assert await agent.flush() == 100
    assert _state(tmp_path, "SELECT count(*) FROM uploads") == [(0,)]


def test_upload_backlog_rows_is_configurable(tmp_path: Path) -> None:
    (tmp_path / "app.db").touch()
    path = tmp_path / "agent.yaml"
    base = ("connection:\n  server_url: mqtt://127.0.0.1:1883\n  device_id: d1\n"
            f"sqlite-replication:\n  source_db_path: {tmp_path / 'app.db'}\n")
    path.write_text(base)
    assert load_config(path).replication.upload_backlog_rows == 50_000
    path.write_text(base + "  upload_backlog_rows: 0\n")
    assert load_config(path).replication.upload_backlog_rows == 0
    path.write_text(base + "  upload_backlog_rows: -1\n")
    with pytest.raises(Exception, match="upload_backlog_rows"):
        load_config(path)
