"""Progress controls confirm batches, not a watermark; unconfirmed batches are re-sent
after ``confirm_timeout``."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import orjson
from agent_helpers import eventually, make_config, next_message, observer, send_control
from conftest import Capture

from edgesync.agent import Agent
from edgesync.agent.capture._telemetry_state import TelemetryState
from edgesync.agent.link._progress import parse_committed, resend_unconfirmed, rows_progress


def journal_seqs(db: sqlite3.Connection) -> list[int]:
    return [r[0] for r in db.execute("SELECT commit_seq FROM __edgesync_journal ORDER BY 1")]


def confirmed(*batches: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: b[k] for k in ("batch_id", "first_commit_seq", "last_commit_seq")}
            for b in batches]


def publish_all(cap: Capture, table: str, at: float) -> list[dict[str, Any]]:
    out = []
    while (b := cap.batcher.next_batch(table)) is not None:
        cap.state.confirm(b.pending, at)
        out.append(orjson.loads(b.payload))
    return out


def test_a_lost_batch_in_the_middle_is_kept_and_sent_again(
        app: sqlite3.Connection, capture: type[Capture]) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    app.execute("CREATE TABLE u (id INTEGER PRIMARY KEY)")
    cap = capture()
    n = 4096  # rows per batch
    app.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(1, 2 * n + 11)])
    app.execute("INSERT INTO u VALUES (1)")  # the journal's top row: it always stays
    docs = publish_all(cap, "t", at=100.0)
    assert [(d["first_commit_seq"], d["last_commit_seq"]) for d in docs] == [
        (1, n), (n + 1, 2 * n), (2 * n + 1, 2 * n + 10)]
    epoch = docs[0]["journal_epoch"]
    doc = {"control_id": "p1", "control_kind": "progress", "source_table": "t",
           "journal_epoch": epoch, "committed": confirmed(docs[0], docs[2])}
    assert rows_progress(doc, "t", cap.db, cap.state, None) == n + 10
    assert journal_seqs(cap.db) == [*range(n + 1, 2 * n + 1), 2 * n + 11]  # the lost batch
    assert [p.batch_id for p in cap.state.published_batches("t")] == [docs[1]["batch_id"]]

    # not yet timed out: nothing to re-send
    tele = TelemetryState(cap.state)
    resend_unconfirmed(cap.state, tele, ["t", "u"], [], published_before=100.0)
    assert cap.batcher.next_batch("t") is None
    # timed out: the cursor goes back before the lost range, which is rebuilt
    resend_unconfirmed(cap.state, tele, ["t", "u"], [], published_before=160.0)
    [again] = publish_all(cap, "t", at=200.0)
    assert (again["first_commit_seq"], again["last_commit_seq"]) == (n + 1, 2 * n)
    assert again["batch_id"] != docs[1]["batch_id"]
    # a late confirmation of the old id and one of the new id both delete the range
    doc2 = dict(doc, control_id="p2", committed=confirmed(docs[1], again))
    assert rows_progress(doc2, "t", cap.db, cap.state, None) == n
    assert journal_seqs(cap.db) == [2 * n + 11] and cap.state.published_batches("t") == []


def test_confirmation_covers_rows_gone_before_the_batch_was_built(
        app: sqlite3.Connection, capture: type[Capture]) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    cap = capture()
    app.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(1, 6)])
    app.execute("DELETE FROM t WHERE id IN (1, 2)")  # 6, 7: inserts 1 and 2 now carry nothing
    app.execute("INSERT INTO t VALUES (9)")  # 8
    [doc] = publish_all(cap, "t", at=1.0)
    assert [r["commit_seq"] for r in doc["rows"]] == [3, 4, 5, 6, 7, 8]
    assert doc["first_commit_seq"] == 3  # what the cloud will confirm
    ctl = {"control_id": "p", "control_kind": "progress", "source_table": "t",
           "journal_epoch": doc["journal_epoch"], "committed": confirmed(doc)}
    rows_progress(ctl, "t", cap.db, cap.state, None)
    assert journal_seqs(cap.db) == [8]  # 1 and 2 went too: the recorded range is used


def test_progress_before_the_puback_confirms_the_pending_batch(
        app: sqlite3.Connection, capture: type[Capture]) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    cap = capture()
    app.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(1, 4)])
    batch = cap.batcher.next_batch("t")
    assert batch is not None
    doc = orjson.loads(batch.payload)
    rows_progress({"control_id": "p", "source_table": "t", "journal_epoch":
                   doc["journal_epoch"], "committed": confirmed(doc)}, "t", cap.db,
                  cap.state, None)
    cap.state.confirm(batch.pending, 5.0)  # the PUBACK, late: nothing left to await
    assert cap.state.pending("t") is None and cap.state.published_batches("t") == []
    assert cap.batcher.next_batch("t") is None


def test_parse_committed_refuses_malformed_entries() -> None:
    assert parse_committed({"committed": [{"batch_id": "b", "batch_seq": 3}]}) is not None
    assert parse_committed({}) == []
    for bad in ("x", [{"first_commit_seq": 1, "last_commit_seq": 2}],
                [{"batch_id": "b", "first_commit_seq": 3, "last_commit_seq": 2}],
                [{"batch_id": "b", "first_commit_seq": 1}]):
        assert parse_committed({"committed": bad}) is None


async def test_unconfirmed_batches_are_sent_again_over_mqtt(
        app: sqlite3.Connection, source_db: Path, tmp_path: Path, device_id: str) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    app.execute("CREATE TABLE temps (id INTEGER PRIMARY KEY, ts TEXT, v REAL)")
    cfg = make_config(device_id, source_db, tmp_path, confirm_timeout_s=0.05,
                      snapshot_on_first_run=True,
                      strategies={"temps": {"strategy": "telemetry", "ts_column": "ts"}})
    root = cfg.connection.root_topic
    async with observer(device_id) as obs, Agent(cfg) as agent:
        await obs.subscribe(f"{root}/sync/#", qos=1)
        app.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(1, 4)])
        app.execute("INSERT INTO temps VALUES (1, '2026-04-28T09:00:01Z', 1.5)")
        assert await agent.flush() == 4
        rows1 = await next_message(obs, f"{root}/sync/rows/batch")
        tele1 = await next_message(obs, f"{root}/sync/telemetry/batch")
        # no progress control came: a flush after confirm_timeout re-sends both
        await asyncio.sleep(0.1)
        assert await agent.flush() == 4
        rows2 = await next_message(obs, f"{root}/sync/rows/batch")
        tele2 = await next_message(obs, f"{root}/sync/telemetry/batch")
        assert rows2["rows"] == rows1["rows"]
        assert tele2 == tele1  # byte for byte: same batch_id and batch_seq
        await send_control(obs, root, {
            "control_id": "c1", "control_kind": "progress", "source_table": "t",
            "journal_epoch": rows2["journal_epoch"], "committed": confirmed(rows2)})
        await send_control(obs, root, {
            "control_id": "c2", "control_kind": "progress", "source_table": "temps",
            "committed": [{"batch_id": tele1["batch_id"], "batch_seq": 1}]})
        assert (await next_message(obs, f"{root}/sync/ingest/ack"))["control_id"] == "c1"
        assert (await next_message(obs, f"{root}/sync/ingest/ack"))["control_id"] == "c2"
        await eventually(lambda: state_count(tmp_path, "published_batches") == 0
                         and state_count(tmp_path, "telemetry_outbox") == 0)


def state_count(tmp_path: Path, table: str) -> int:
    with sqlite3.connect(tmp_path / "state.db") as db:
        n = int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    db.close()
    return n
