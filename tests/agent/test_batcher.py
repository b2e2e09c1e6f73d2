"""Row batches: fields per payload-formats.md, size limits, schema_columns, stable ids."""

from __future__ import annotations

import re
import sqlite3
import uuid
from typing import Any

import orjson

from edgesync import _core
from edgesync._core import MAX_BATCH_BYTES, MAX_BATCH_ROWS
from edgesync.agent.capture._batcher import truncate_journal
from edgesync.protocol import uuid7

FORBIDDEN = {"device_id", "org_id", "project_id", "fleet_id"}


def _drain(cap: Any, table: str) -> list[dict[str, Any]]:
    """Build and 'publish' every batch of ``table``; returns the decoded payloads."""
    out = []
    while (batch := cap.batcher.next_batch(table)) is not None:
        assert len(batch.payload) <= MAX_BATCH_BYTES
        _core.decode_row_batch(batch.payload)  # the cloud's validator accepts it
        doc = orjson.loads(batch.payload)
        assert len(doc["rows"]) == batch.row_count
        cap.state.confirm(batch.pending)
        out.append(doc)
    return out


def test_payload_fields(app: sqlite3.Connection, capture: Any) -> None:
    app.execute("CREATE TABLE device_state (id INTEGER PRIMARY KEY, mode TEXT NOT NULL, "
                "setpoint REAL, raw BLOB)")
    cap = capture()
    app.execute("INSERT INTO device_state VALUES (1, 'cooling', 21, x'01')")
    app.execute("UPDATE device_state SET setpoint = 22.5")
    app.execute("INSERT INTO device_state VALUES (2, 'idle', NULL, NULL)")
    app.execute("DELETE FROM device_state WHERE id = 2")
    [doc] = _drain(cap, "device_state")
    assert list(doc) == [
        "format_version", "capture_strategy", "batch_id", "journal_epoch", "source_table",
        "schema_hash", "schema_columns", "first_commit_seq", "last_commit_seq", "rows"]
    assert doc["format_version"] == 1
    assert doc["capture_strategy"] == "sqlite_row_batch_v1"
    for key in ("batch_id", "journal_epoch"):
        u = uuid.UUID(doc[key])
        assert u.version == 7 and str(u) == doc[key]
    assert doc["journal_epoch"] == cap.state.table("device_state").journal_epoch
    assert doc["source_table"] == "device_state"
    assert re.fullmatch(r"[0-9a-f]{64}", doc["schema_hash"])
    schema_hash, canonical = _core.schema_fingerprint("device_state", [
        ("id", "INTEGER", 1, False), ("mode", "TEXT", 0, True), ("setpoint", "REAL", 0, False),
        ("raw", "BLOB", 0, False)])
    assert doc["schema_hash"] == schema_hash
    assert doc["schema_columns"] == orjson.loads(canonical)
    assert doc["schema_columns"]["table_name"] == "device_state"
    assert {c["name"] for c in doc["schema_columns"]["columns"]} == {
        "id", "mode", "setpoint", "raw"}
    # rows are read when the batch is built: the insert carries the updated row, and
    # the insert of 2 is left out because 2 is gone (its delete follows)
    row1 = {"id": 1, "mode": "cooling", "setpoint": 22.5, "raw": {"$blob": "01"}}
    assert doc["rows"] == [
        {"commit_seq": 1, "op": "insert", "pk": {"id": 1}, "row": row1},
        {"commit_seq": 2, "op": "update", "pk": {"id": 1}, "row": row1},
        {"commit_seq": 4, "op": "delete", "pk": {"id": 2}, "row": None},
    ]
    assert (doc["first_commit_seq"], doc["last_commit_seq"]) == (1, 4)
    assert not FORBIDDEN & set(doc)


def test_schema_columns_only_on_first_batch_after_a_new_schema(app: sqlite3.Connection,
                                                               capture: Any) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    cap = capture()
    app.execute("INSERT INTO t VALUES (1, 'a')")
    [first] = _drain(cap, "t")
    app.execute("INSERT INTO t VALUES (2, 'b')")
    [second] = _drain(cap, "t")
    assert "schema_columns" in first and "schema_columns" not in second
    assert second["schema_hash"] == first["schema_hash"]
    assert second["first_commit_seq"] == 2
    # same schema seen again (agent restart): still not re-sent
    cap2 = capture()
    app.execute("INSERT INTO t VALUES (3, 'c')")
    [third] = _drain(cap2, "t")
    assert "schema_columns" not in third
    # DDL: new fingerprint -> schema_columns again, once
    app.execute("ALTER TABLE t ADD COLUMN w INTEGER")
    cap3 = capture()
    app.execute("INSERT INTO t VALUES (4, 'd', 7)")
    [fourth] = _drain(cap3, "t")
    assert fourth["schema_hash"] != first["schema_hash"]
    assert {c["name"] for c in fourth["schema_columns"]["columns"]} == {"id", "v", "w"}
    assert fourth["rows"][0]["row"] == {"id": 4, "v": "d", "w": 7}


def test_split_at_4096_rows(app: sqlite3.Connection, capture: Any) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER)")
    cap = capture()
    with app:
        app.execute("BEGIN")
        app.executemany("INSERT INTO t VALUES (?, ?)", [(i, i) for i in range(10_000)])
    docs = _drain(cap, "t")
    assert [len(d["rows"]) for d in docs] == [MAX_BATCH_ROWS, MAX_BATCH_ROWS, 10_000 - 8192]
    seqs = [r["commit_seq"] for d in docs for r in d["rows"]]
    assert seqs == list(range(1, 10_001))
    for d in docs:
        assert d["first_commit_seq"] == d["rows"][0]["commit_seq"]
        assert d["last_commit_seq"] == d["rows"][-1]["commit_seq"]
    assert "schema_columns" in docs[0] and all("schema_columns" not in d for d in docs[1:])
    assert len({d["batch_id"] for d in docs}) == 3
    assert docs[0]["batch_id"] < docs[1]["batch_id"] < docs[2]["batch_id"]


def test_split_at_512_kib(app: sqlite3.Connection, capture: Any) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
    cap = capture()
    body = "x" * 10_000
    app.executemany("INSERT INTO t VALUES (?, ?)", [(i, body) for i in range(200)])
    docs = _drain(cap, "t")
    assert len(docs) == 4
    sizes = [len(orjson.dumps(d)) for d in docs]
    assert all(s <= MAX_BATCH_BYTES for s in sizes)
    assert sizes[0] > MAX_BATCH_BYTES - 11_000  # filled up before splitting
    assert sum(len(d["rows"]) for d in docs) == 200


def test_same_batch_id_after_a_crash_before_confirmation(app: sqlite3.Connection,
                                                         capture: Any) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    cap = capture()
    app.executemany("INSERT INTO t VALUES (?, 'a')", [(i,) for i in range(5)])
    first = cap.batcher.next_batch("t")
    assert first is not None
    cap.close()  # crash: published (maybe) but never confirmed
    app.executemany("INSERT INTO t VALUES (?, 'b')", [(i,) for i in range(5, 9)])
    cap2 = capture()  # restart: reinstall triggers, reopen state.db
    again = cap2.batcher.next_batch("t")
    assert again is not None
    assert again.pending == first.pending
    assert again.payload == first.payload
    cap2.state.confirm(again.pending)
    rest = cap2.batcher.next_batch("t")
    assert rest is not None and rest.pending.batch_id != first.pending.batch_id
    doc = orjson.loads(rest.payload)
    assert [r["commit_seq"] for r in doc["rows"]] == [6, 7, 8, 9]
    assert "schema_columns" not in doc


def test_progress_truncation_keeps_commit_seq_monotonic(app: sqlite3.Connection,
                                                        capture: Any) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    cap = capture()
    app.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(3)])
    pending = cap.batcher.next_batch("t")
    assert pending is not None
    # the cloud committed it before we saw the PUBACK: the pending batch is dropped
    assert truncate_journal(cap.db, "t", 3) == 2  # the highest row stays
    cap.state.record_progress("t", 3)
    assert cap.batcher.next_batch("t") is None
    app.execute("INSERT INTO t VALUES (10)")
    batch = cap.batcher.next_batch("t")
    assert batch is not None and batch.pending.first_commit_seq == 4


def test_journal_rebuild_starts_a_new_epoch(app: sqlite3.Connection, capture: Any) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    cap = capture()
    app.execute("INSERT INTO t VALUES (1)")
    [doc] = _drain(cap, "t")
    cap.db.execute("DROP TABLE __edgesync_journal")
    cap2 = capture()
    app.execute("INSERT INTO t VALUES (2)")
    [doc2] = _drain(cap2, "t")
    assert doc2["journal_epoch"] != doc["journal_epoch"]
    assert doc2["first_commit_seq"] == 1 and "schema_columns" in doc2


def test_uuid7_layout_and_monotonic() -> None:
    ids = [uuid7() for _ in range(10_000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    u = uuid.UUID(ids[0])
    assert u.version == 7 and u.variant == uuid.RFC_4122
    import time
    ms = u.int >> 80
    assert abs(ms - time.time() * 1000) < 60_000


def test_row_values_written_by_the_rust_encoder(app: sqlite3.Connection, capture: Any
                                                ) -> None:
    """REAL round-trips exactly, ±inf is null, BLOBs are upper hex, TEXT escaped."""
    app.execute("CREATE TABLE v (k TEXT PRIMARY KEY COLLATE NOCASE, r REAL, b BLOB, x)")
    cap = capture()
    reals = [0.1, 1 / 3, 1e20, 5e-324, 2.0 ** 53 + 2, -123456789.123]
    for i, r in enumerate(reals):
        app.execute("INSERT INTO v VALUES (?, ?, x'00ab', ?)", (f"k{i}\n\"", r, i))
    app.execute("INSERT INTO v VALUES ('inf', 9e999, NULL, -9e999)")
    [doc] = _drain(cap, "v")
    rows = {r["pk"]["k"]: r["row"] for r in doc["rows"]}
    for i, r in enumerate(reals):
        got = rows[f"k{i}\n\""]
        assert isinstance(got["r"], float) and repr(got["r"]) == repr(r)
        assert got["b"] == {"$blob": "00AB"} and got["x"] == i
    assert rows["inf"] == {"k": "inf", "r": None, "b": None, "x": None}


def test_null_primary_key_row_and_gone_row(app: sqlite3.Connection, capture: Any) -> None:
    """SQLite allows NULL in a rowid table's TEXT primary key: such a row is found, and
    a row deleted before the flush is still left out."""
    app.execute("CREATE TABLE n (k TEXT PRIMARY KEY, v INTEGER)")
    cap = capture()
    app.execute("INSERT INTO n VALUES (NULL, 1)")
    app.execute("INSERT INTO n VALUES ('gone', 2)")
    app.execute("DELETE FROM n WHERE k = 'gone'")
    [doc] = _drain(cap, "n")
    assert [(r["op"], r["pk"], r["row"]) for r in doc["rows"]] == [
        ("insert", {"k": None}, {"k": None, "v": 1}),
        ("delete", {"k": "gone"}, None)]
    app.execute("DELETE FROM n")
    app.execute("INSERT INTO n VALUES ('a', 3)")
    app.execute("UPDATE n SET v = 4")
    [doc] = _drain(cap, "n")
    assert [(r["op"], r["row"]) for r in doc["rows"]] == [
        ("delete", None), ("insert", {"k": "a", "v": 4}), ("update", {"k": "a", "v": 4})]


def test_text_that_is_not_utf8_is_sent_replaced(app: sqlite3.Connection, capture: Any
                                                ) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, s TEXT)")
    cap = capture()
    app.execute("INSERT INTO t VALUES (1, CAST(x'61ff62' AS TEXT))")
    app.execute("INSERT INTO t VALUES (2, 'ok')")
    [doc] = _drain(cap, "t")
    assert [r["row"]["s"] for r in doc["rows"]] == ["a\ufffdb", "ok"]
    assert cap.db.text_factory is str
