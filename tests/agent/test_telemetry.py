"""Telemetry tables: cursor + look-back, payload per payload-formats.md, batch_seq."""

from __future__ import annotations

import re
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from agent_helpers import eventually, make_config, next_message, observer, send_control

from edgesync import _core
from edgesync.agent import Agent
from edgesync.agent._state import StateStore
from edgesync.agent.capture._discovery import read_table, telemetry_table
from edgesync.agent.capture._telemetry import TelemetryCapture, format_ts, parse_ts, row_id
from edgesync.agent.capture._telemetry_state import TelemetryState

# The cloud side of telemetry is written in parallel; check against it once it is built.
CLOUD_DECODER = getattr(_core, "decode_telemetry_batch", None)

FIELDS = ["format_version", "capture_strategy", "batch_id", "batch_seq", "source_table",
          "schema_hash", "schema_columns", "cursor_start_ts", "cursor_end_ts", "row_count",
          "first_seen_at_ms", "rows"]


class Tele:
    """Telemetry capture of one table, without MQTT."""

    def __init__(self, source: Path, state: Path, table: str, *, ts: str = "ts",
                 include: list[str] | None = None, lookback: float = 30,
                 from_start: bool = False) -> None:
        self.db = sqlite3.connect(source, isolation_level=None)
        self.store = StateStore(state)
        self.state = TelemetryState(self.store)
        self.cap = TelemetryCapture(self.db, self.state, lookback)
        spec = telemetry_table(read_table(self.db, table), ts, include)
        assert not isinstance(spec, str)
        self.table = table
        self.cap.register(spec, from_start=from_start)

    def drain(self) -> list[dict[str, Any]]:
        out = []
        while (b := self.cap.next_batch(self.table)) is not None:
            self.state.published(b)
            if CLOUD_DECODER is not None:  # the cloud's validator accepts it
                CLOUD_DECODER(b.payload)
            out.append(orjson.loads(b.payload))
        return out

    def close(self) -> None:
        self.db.close()
        self.store.close()


@pytest.fixture
def tele(source_db: Path, tmp_path: Path) -> Any:
    opened: list[Tele] = []

    def make(table: str, **kw: Any) -> Tele:
        t = Tele(source_db, tmp_path / "state.db", table, **kw)
        opened.append(t)
        return t

    yield make
    for t in opened:
        t.close()


def test_payload_fields_and_values(app: sqlite3.Connection, tele: Any) -> None:
    app.execute("CREATE TABLE temps (id INTEGER PRIMARY KEY, ts TEXT NOT NULL, value_c REAL, "
                "raw BLOB, note TEXT)")
    t = tele("temps", include=["value_c", "raw"], from_start=True)
    app.execute("INSERT INTO temps VALUES (1, '2026-04-28T09:00:01Z', 22.1, NULL, 'x')")
    app.execute("INSERT INTO temps VALUES (2, '2026-04-28T09:00:00.25Z', 21.5, x'01', 'y')")
    [doc] = t.drain()
    assert list(doc) == FIELDS
    assert doc["format_version"] == 1
    assert doc["capture_strategy"] == "sqlite_telemetry_batch_v1"
    assert uuid.UUID(doc["batch_id"]).version == 7
    assert doc["batch_seq"] == 1 and doc["source_table"] == "temps"
    assert re.fullmatch(r"[0-9a-f]{64}", doc["schema_hash"])
    assert _core.schema_fingerprint("temps", [
        ("ts", "TEXT", 0, True), ("value_c", "REAL", 0, False), ("raw", "BLOB", 0, False),
    ])[0] == doc["schema_hash"]
    assert {c["name"] for c in doc["schema_columns"]["columns"]} == {"ts", "value_c", "raw"}
    assert doc["row_count"] == 2
    # rows in (ts, key) order; cursor_* are the min and max row ts
    assert [r["ts"] for r in doc["rows"]] == ["2026-04-28T09:00:00.25Z",
                                             "2026-04-28T09:00:01Z"]
    assert (doc["cursor_start_ts"], doc["cursor_end_ts"]) == (
        "2026-04-28T09:00:00.25Z", "2026-04-28T09:00:01Z")
    # ts_column travels as a field too (as stored), so its mirrored column is filled.
    assert [r["fields"] for r in doc["rows"]] == [
        {"ts": "2026-04-28T09:00:00.25Z", "value_c": 21.5, "raw": {"$blob": "01"}},
        {"ts": "2026-04-28T09:00:01Z", "value_c": 22.1, "raw": None}]
    for r in doc["rows"]:
        u = uuid.UUID(r["row_id"])
        assert u.version == 7 and u.variant == uuid.RFC_4122
    assert doc["rows"][1]["row_id"] == row_id("temps", "[1]", parse_ts("2026-04-28T09:00:01Z")
                                              or 0)
    assert not {"device_id", "org_id", "project_id", "fleet_id"} & set(doc)


def test_timestamp_forms() -> None:
    us = parse_ts("2026-04-28T09:00:01Z")
    assert us is not None and format_ts(us) == "2026-04-28T09:00:01Z"
    assert parse_ts("2026-04-28 09:00:01") == us  # no offset: UTC
    assert parse_ts("2026-04-28T11:00:01+02:00") == us
    assert parse_ts(us / 1e6) == us  # epoch seconds
    assert parse_ts(us // 1000) == us  # epoch milliseconds
    assert parse_ts("yesterday") is None and parse_ts(None) is None
    assert format_ts(us + 1500) == "2026-04-28T09:00:01.0015Z"


def test_equal_timestamps_across_a_batch_boundary(app: sqlite3.Connection,
                                                  tele: Any) -> None:
    app.execute("CREATE TABLE m (site TEXT, n INTEGER, ts INTEGER, v REAL, "
                "PRIMARY KEY (site, n))")
    t = tele("m", from_start=True)
    app.executemany("INSERT INTO m VALUES (?, ?, 1777366800, ?)",
                    [(s, i, i * 0.5) for s in ("a", "b") for i in range(3000)])
    docs = t.drain()
    # Cut by bytes (each row carries its ts field too), not at MAX_BATCH_ROWS.
    assert [d["row_count"] for d in docs] == [3864, 2136]
    assert [d["batch_seq"] for d in docs] == [1, 2]
    assert "schema_columns" in docs[0] and "schema_columns" not in docs[1]
    ids = [r["row_id"] for d in docs for r in d["rows"]]
    assert len(ids) == len(set(ids)) == 6000
    assert {r["ts"] for d in docs for r in d["rows"]} == {"2026-04-28T09:00:00Z"}
    assert t.drain() == []


def test_late_rows_inside_the_look_back_are_sent_once(app: sqlite3.Connection,
                                                      tele: Any) -> None:
    app.execute("CREATE TABLE r (id INTEGER PRIMARY KEY, ts TEXT, v INTEGER)")
    t = tele("r", lookback=60, from_start=True)
    app.execute("INSERT INTO r VALUES (1, '2026-04-28T09:00:00Z', 1), "
                "(2, '2026-04-28T09:01:00Z', 2)")
    assert [d["row_count"] for d in t.drain()] == [2]
    # committed later, timestamped before the cursor: 30 s late (inside the window) and
    # 2 min late (outside: sent all the same, it has a new rowid); in (ts, key) order
    app.execute("INSERT INTO r VALUES (3, '2026-04-28T09:00:30Z', 3), "
                "(4, '2026-04-28T08:59:00Z', 4)")
    [doc] = t.drain()
    assert [r["fields"]["v"] for r in doc["rows"]] == [4, 3]
    assert (doc["cursor_start_ts"], doc["cursor_end_ts"]) == ("2026-04-28T08:59:00Z",
                                                              "2026-04-28T09:00:30Z")
    assert t.drain() == []
    # the clock jumps back by 20 s: rows behind the cursor but inside the window
    app.execute("INSERT INTO r VALUES (5, '2026-04-28T09:00:40Z', 5)")
    app.execute("INSERT INTO r VALUES (6, '2026-04-28T09:00:41Z', 6)")
    [doc] = t.drain()
    assert [r["fields"]["v"] for r in doc["rows"]] == [5, 6]
    assert doc["batch_seq"] == 3


def test_without_rowid_table_keeps_the_look_back_limit(app: sqlite3.Connection,
                                                        tele: Any) -> None:
    """A WITHOUT ROWID table has no insertion order to read: only the window."""
    app.execute("CREATE TABLE w (id INTEGER PRIMARY KEY, ts TEXT, v INTEGER) WITHOUT ROWID")
    t = tele("w", lookback=60, from_start=True)
    app.execute("INSERT INTO w VALUES (1, '2026-04-28T09:00:00Z', 1), "
                "(2, '2026-04-28T09:01:00Z', 2)")
    assert [d["row_count"] for d in t.drain()] == [2]
    app.execute("INSERT INTO w VALUES (3, '2026-04-28T09:00:30Z', 3), "
                "(4, '2026-04-28T08:59:00Z', 4)")
    [doc] = t.drain()
    assert [r["fields"]["v"] for r in doc["rows"]] == [3]  # 4: behind the window, not sent
    assert t.drain() == []


def test_existing_rows_are_not_sent_without_snapshot(app: sqlite3.Connection,
                                                     tele: Any) -> None:
    app.execute("CREATE TABLE r (ts REAL, v INTEGER)")  # no primary key: rowid is the key
    app.executemany("INSERT INTO r VALUES (?, ?)", [(1777366800 + i, i) for i in range(5)])
    t = tele("r", lookback=60)
    assert t.drain() == []
    app.execute("INSERT INTO r VALUES (1777366802, 99)")  # late, inside the window
    [doc] = t.drain()
    assert [r["fields"] for r in doc["rows"]] == [{"ts": 1777366802.0, "v": 99}]


def test_batch_seq_and_cursor_survive_a_restart(app: sqlite3.Connection, source_db: Path,
                                                tmp_path: Path) -> None:
    app.execute("CREATE TABLE r (id INTEGER PRIMARY KEY, ts INTEGER, v INTEGER)")
    t = Tele(source_db, tmp_path / "state.db", "r", from_start=True)
    app.execute("INSERT INTO r VALUES (1, 1777366800000, 1)")  # epoch milliseconds
    built = t.cap.next_batch("r")
    assert built is not None
    t.close()  # crash before publishing: the batch waits in the outbox
    t2 = Tele(source_db, tmp_path / "state.db", "r")
    [again] = t2.state.unpublished("r")
    assert again == built
    t2.state.published(again)
    app.execute("INSERT INTO r VALUES (2, 1777366801000, 2)")
    [doc] = t2.drain()
    assert doc["batch_seq"] == 2 and [r["fields"]["v"] for r in doc["rows"]] == [2]
    assert "schema_columns" not in doc
    assert t2.state.committed("r", 1) == 1
    t2.close()


async def test_telemetry_over_mqtt_with_progress_and_resume(
        app: sqlite3.Connection, source_db: Path, tmp_path: Path, device_id: str) -> None:
    app.execute("CREATE TABLE temps (id INTEGER PRIMARY KEY, ts TEXT, value_c REAL)")
    cfg = make_config(device_id, source_db, tmp_path,
                      strategies={"temps": {"strategy": "telemetry", "ts_column": "ts"}},
                      snapshot_on_first_run=True)
    root = cfg.connection.root_topic
    async with observer(device_id) as obs, Agent(cfg) as agent:
        await obs.subscribe(f"{root}/sync/#", qos=1)
        app.execute("INSERT INTO temps VALUES (1, '2026-04-28T09:00:01Z', 22.1)")
        assert await agent.flush() == 1
        first = await next_message(obs, f"{root}/sync/telemetry/batch")
        app.execute("INSERT INTO temps VALUES (2, '2026-04-28T09:00:02Z', 22.2)")
        assert await agent.flush() == 1
        second = await next_message(obs, f"{root}/sync/telemetry/batch")
        assert (first["batch_seq"], second["batch_seq"]) == (1, 2)
        # the cloud lost batch 2 while the lineage was paused: resume re-sends it as is
        await send_control(obs, root, {"control_id": "p", "control_kind": "pause_lineage",
                                       "source_table": "temps", "server_watermark": 1})
        await next_message(obs, f"{root}/sync/ingest/ack")
        await send_control(obs, root, {"control_id": "r", "control_kind": "resume_lineage",
                                       "source_table": "temps", "server_watermark": 1})
        await next_message(obs, f"{root}/sync/ingest/ack")
        assert await agent.flush() == 1
        assert await next_message(obs, f"{root}/sync/telemetry/batch") == second
        await send_control(obs, root, {"control_id": "c", "control_kind": "progress",
                                       "source_table": "temps", "committed": [
                                           {"batch_id": b["batch_id"], "batch_seq": b["batch_seq"]}
                                           for b in (first, second)]})
        await next_message(obs, f"{root}/sync/ingest/ack")
        await eventually(lambda: outbox_size(tmp_path) == 0)


def outbox_size(tmp_path: Path) -> int:
    with sqlite3.connect(tmp_path / "state.db") as db:
        n = int(db.execute("SELECT count(*) FROM telemetry_outbox").fetchone()[0])
    db.close()
    return n
