"""What the agent puts on the wire (issue 29): zstd batches, the bandwidth budget (a
token bucket and a UTC day's budget that survives a restart), table priorities, and the
status report's wire figures. Real agent, real SQLite, the suite's Mosquitto."""

from __future__ import annotations

import asyncio
import copy
import sqlite3
import time
from pathlib import Path
from typing import Any

import aiomqtt
import orjson
import pytest
from agent_helpers import make_config, observer, send_control

from edgesync import _core
from edgesync.agent import Agent
from edgesync.agent._state import StateStore
from edgesync.agent.config import parse_config
from edgesync.agent.link._remote_policy import RemotePolicy
from edgesync.agent.link._wire import WireBudget, packet_bytes
from edgesync.protocol import (
    Compression,
    StatusReport,
    parse_status,
    parse_table_strategies,
    table_strategies_doc,
)

_BASE: dict[str, Any] = {
    "connection": {"server_url": "mqtt://127.0.0.1:1883", "device_id": "gw"},
    "sqlite-replication": {"source_db_path": "/tmp/app.db"}}


def _parse(**sections: dict[str, Any]) -> tuple[Any, list[str]]:
    doc = copy.deepcopy(_BASE)
    for name, keys in sections.items():
        doc[name.replace("_", "-") if name == "sqlite_replication" else name].update(keys)
    cfg, errors = parse_config(doc, {})
    return cfg, [str(e) for e in errors]


# ------------------------------------------------------------------ configuration


def test_defaults_are_the_reference_wire() -> None:
    cfg, errors = _parse()
    assert errors == []
    assert cfg.replication.compression is Compression.NONE
    assert (cfg.connection.max_bytes_per_second, cfg.connection.max_bytes_per_day) == (0, 0)


def test_settings_are_read() -> None:
    cfg, errors = _parse(
        connection={"max_bytes_per_second": "16KiB", "max_bytes_per_day": 50_000_000},
        sqlite_replication={"compression": "zstd", "table_strategies": {
            "readings": {"strategy": "telemetry", "ts_column": "ts", "priority": 20},
            "alarms": {"strategy": "rows", "priority": 0}, "state": {"strategy": "rows"}}})
    assert errors == []
    assert cfg.replication.compression is Compression.ZSTD
    assert (cfg.connection.max_bytes_per_second, cfg.connection.max_bytes_per_day) == (
        16 * 1024, 50_000_000)
    ranks = {t: s.rank for t, s in cfg.replication.table_strategies.items()}
    assert ranks == {"readings": 20, "alarms": 0, "state": 0}
    assert cfg.replication.strategy_for("unlisted").rank == 0


@pytest.mark.parametrize(("sections", "error"), [
    ({"sqlite_replication": {"compression": "gzip"}},
     "sqlite-replication.compression: 'gzip' is not allowed; use 'none' or 'zstd'"),
    ({"sqlite_replication": {"compression": True}},
     "sqlite-replication.compression: True is not allowed; use 'none' or 'zstd'"),
    ({"connection": {"max_bytes_per_second": -5}},
     "connection.max_bytes_per_second: -5 is not a budget; use 0 (unlimited) or a size "
     "such as 65536 or 64KiB"),
    ({"connection": {"max_bytes_per_day": "lots"}},
     "connection.max_bytes_per_day: 'lots' is not a budget; use 0 (unlimited) or a size "
     "such as 65536 or 64KiB"),
    ({"sqlite_replication": {"table_strategies": {"t": {"strategy": "rows",
                                                        "priority": "high"}}}},
     "sqlite-replication.table_strategies.t.priority: must be an integer from 0 to 1000000 "
     "(lower goes first)"),
])
def test_a_bad_value_is_one_clear_error(sections: dict[str, dict[str, Any]], error: str
                                        ) -> None:
    cfg, errors = _parse(**sections)
    assert cfg is None and errors == [error]


def test_a_policy_document_takes_priority_by_the_same_rule() -> None:
    doc = {"r": {"strategy": "telemetry", "ts_column": "ts", "priority": 3}}
    strategies, errors = parse_table_strategies(doc)
    assert errors == [] and table_strategies_doc(strategies) == doc
    _, errors = parse_table_strategies({"r": {"strategy": "rows", "priority": -1}})
    assert [e.field for e in errors] == ["table_strategies.r.priority"]
    # No priority given: the document stays as the reference's (nothing added).
    plain = {"s": {"strategy": "rows"}}
    assert table_strategies_doc(parse_table_strategies(plain)[0]) == plain


# ------------------------------------------------------------------ the budget itself


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.day = "2026-01-01"

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


async def test_the_token_bucket_holds_the_rate() -> None:
    clock = _Clock()
    budget = WireBudget(2_000, 0, monotonic=clock.monotonic, today=lambda: clock.day,
                        sleep=clock.sleep)
    for _ in range(20):  # 20 kB at 2 kB/s, the first 2 kB from the full bucket
        await budget.admit(1_000)
        budget.spend(1_000)
    assert 8.9 <= clock.now <= 9.1
    # What never waits (a control, an ack) still counts: the next packet waits for it.
    budget.spend(4_000)
    before = clock.now
    await budget.admit(1_000)
    assert clock.now - before == pytest.approx(2.5)
    # A packet over a second's worth waits for a full bucket, then goes.
    await budget.admit(10_000)
    assert budget.spent_today == 24_000


def test_the_day_budget_resets_at_the_next_utc_day() -> None:
    clock = _Clock()
    budget = WireBudget(0, 1_000, spent=(clock.day, 900), today=lambda: clock.day)
    assert (budget.spent_today, budget.left_today, budget.data_waits()) == (900, 100, False)
    budget.spend(150)
    assert (budget.left_today, budget.data_waits()) == (0, True)
    clock.day = "2026-01-02"
    assert (budget.spent_today, budget.left_today, budget.data_waits()) == (0, 1_000, False)
    # What a state.db says of an earlier day does not count today.
    assert WireBudget(0, 1_000, spent=("2025-12-31", 5_000),
                      today=lambda: clock.day).spent_today == 0
    assert WireBudget(0, 0, today=lambda: clock.day).left_today is None


# ------------------------------------------------------------------ a real agent


def _messages(received: list[tuple[str, bytes]], kind: str) -> list[bytes]:
    return [p for t, p in received if t.endswith(kind)]


async def _collect(client: aiomqtt.Client, into: list[tuple[str, bytes]]) -> None:
    async for msg in client.messages:
        assert isinstance(msg.payload, bytes)
        into.append((str(msg.topic), msg.payload))


async def _settle(received: list[tuple[str, bytes]], seconds: float = 0.5) -> None:
    """Until nothing new arrived for ``seconds`` (the agent's QoS 1 publishes are acked
    by the broker before the observer necessarily has them)."""
    count = -1
    while count != len(received):
        count = len(received)
        await asyncio.sleep(seconds)


async def test_zstd_batches_decode_to_the_json_and_status_has_wire_figures(
        app: sqlite3.Connection, source_db: Path, tmp_path: Path, device_id: str) -> None:
    app.execute("CREATE TABLE device_state (id INTEGER PRIMARY KEY, mode TEXT)")
    app.execute("CREATE TABLE readings (ts TEXT NOT NULL, v REAL)")
    cfg = make_config(device_id, source_db, tmp_path, compression=Compression.ZSTD,
                      strategies={"readings": {"strategy": "telemetry", "ts_column": "ts"}})
    root = cfg.connection.root_topic
    received: list[tuple[str, bytes]] = []
    async with observer(device_id) as obs, asyncio.TaskGroup() as tg:
        await obs.subscribe(f"{root}/sync/#", qos=1)
        reader = tg.create_task(_collect(obs, received))
        async with Agent(cfg) as agent:
            await asyncio.wait_for(agent.wait_connected(), 10)
            app.executemany("INSERT INTO device_state VALUES (?, ?)",
                            [(i, f"mode-{i % 3}") for i in range(200)])
            app.executemany("INSERT INTO readings VALUES (?, ?)",
                            [(f"2026-01-01T00:00:{i % 60:02d}Z", i / 7) for i in range(300)])
            assert await agent.flush() == 500
        await _settle(received)  # the stopped report too
        reader.cancel()
    rows = _messages(received, "/sync/rows/batch")
    telemetry = _messages(received, "/sync/telemetry/batch")
    assert rows and telemetry
    for frame in rows + telemetry:
        assert frame.startswith(_core.ZSTD_MAGIC)
    decoded = [orjson.loads(_core.decompress_blob(f)) for f in rows]
    assert sum(len(d["rows"]) for d in decoded) == 200
    assert sum(len(orjson.loads(_core.decompress_blob(f))["rows"]) for f in telemetry) == 300
    assert sum(map(len, rows)) < sum(len(_core.decompress_blob(f)) for f in rows) / 3
    # Controls' side of the wire stays JSON; the status report says what went out.
    reports = [orjson.loads(p) for p in _messages(received, "/sync/ingest/request")
               if orjson.loads(p).get("request_kind") == "status"]
    first = reports[0]
    assert first["budget_left_bytes"] is None  # no day budget
    assert first["backlog_by_table"] == {}  # sent before the report
    expected = sum(packet_bytes(t, p) for t, p in received
                   if "/sync/ingest/control" not in t and "/sync/ingest/ack" not in t)
    assert reports[-1]["state"] == "stopped"
    assert first["bytes_sent"] <= reports[-1]["bytes_sent"] <= expected
    # No daily budget: the count is written once a flush and when the agent stops.
    state = StateStore(tmp_path / "state.db")
    try:
        assert state.bytes_spent()[1] == expected
    finally:
        state.close()
    assert isinstance(parse_status(first), StatusReport)
    assert set(parse_status(first).doc) >= {"bytes_sent", "backlog_by_table"}  # type: ignore[union-attr]


async def test_day_budget_stops_data_not_acks_nor_status_and_survives_a_restart(
        app: sqlite3.Connection, source_db: Path, tmp_path: Path, device_id: str) -> None:
    app.execute("CREATE TABLE device_state (id INTEGER PRIMARY KEY, mode TEXT)")
    cfg = make_config(device_id, source_db, tmp_path)
    root = cfg.connection.root_topic
    day = ["2026-03-01"]

    def budget(spent: tuple[str, int]) -> WireBudget:
        # A day's budget smaller than the first batch: the schema observation spends it.
        return WireBudget(0, 100, spent=spent, today=lambda: day[0])

    received: list[tuple[str, bytes]] = []
    async with observer(device_id) as obs, asyncio.TaskGroup() as tg:
        await obs.subscribe(f"{root}/sync/#", qos=1)
        reader = tg.create_task(_collect(obs, received))
        async with Agent(cfg, budget=budget) as agent:
            await asyncio.wait_for(agent.wait_connected(), 10)
            app.execute("INSERT INTO device_state VALUES (1, 'idle')")
            assert await agent.flush() == 0  # data waits
            await send_control(obs, root, {"control_id": "c-1", "control_kind": "sync_policy",
                                           "revision": 1, "table_strategies": None})
            await _settle(received)
            acks = [orjson.loads(p) for p in _messages(received, "/sync/ingest/ack")]
            assert [a["control_id"] for a in acks] == ["c-1"]  # the ack went anyway
            reports = [orjson.loads(p) for p in _messages(received, "/sync/ingest/request")]
            status = next(r for r in reports if r.get("request_kind") == "status")
            assert status["budget_left_bytes"] == 0 and status["bytes_sent"] > 100
            assert status["backlog_by_table"] == {"device_state": 1}
        assert _messages(received, "/sync/rows/batch") == []
        async with Agent(cfg, budget=budget) as agent:  # the day's spending is kept
            await asyncio.wait_for(agent.wait_connected(), 10)
            assert await agent.flush() == 0
            day[0] = "2026-03-02"  # the next UTC day: data goes again
            assert await agent.flush() == 1
            await _settle(received)
        reader.cancel()
    assert len(_messages(received, "/sync/rows/batch")) == 1


async def test_a_state_change_waits_behind_at_most_one_telemetry_batch(
        app: sqlite3.Connection, source_db: Path, tmp_path: Path, device_id: str) -> None:
    app.execute("CREATE TABLE device_state (id INTEGER PRIMARY KEY, mode TEXT)")
    app.execute("CREATE TABLE readings (ts TEXT NOT NULL, v REAL, note TEXT)")
    cfg = make_config(device_id, source_db, tmp_path,
                      strategies={"readings": {"strategy": "telemetry", "ts_column": "ts"}})
    sent: list[str] = []
    async with Agent(cfg) as agent:
        await asyncio.wait_for(agent.wait_connected(), 10)
        app.executemany("INSERT INTO readings VALUES (?, ?, ?)",  # several batches' worth
                        [(f"2026-01-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z",
                          i / 3, "x" * 100) for i in range(20_000)])
        link = agent._link
        publish = link.publish

        async def recording(topic: str, payload: bytes) -> None:
            await publish(topic, payload)
            kind = topic.rsplit("/sync/", 1)[1]
            sent.append(kind)
            if kind == "telemetry/batch" and sent.count(kind) == 1:
                app.execute("INSERT INTO device_state VALUES (1, 'alarm')")  # meanwhile

        link.publish = recording  # type: ignore[method-assign]
        assert await agent.flush() == 20_001
    batches = [k for k in sent if k.endswith("/batch")]
    assert batches.count("telemetry/batch") >= 4
    assert batches[:2] == ["telemetry/batch", "rows/batch"]


async def test_the_token_bucket_paces_a_real_agent(
        app: sqlite3.Connection, source_db: Path, tmp_path: Path, device_id: str) -> None:
    app.execute("CREATE TABLE device_state (id INTEGER PRIMARY KEY, note TEXT)")
    cfg = make_config(device_id, source_db, tmp_path)
    rate = 100_000
    async with Agent(cfg, budget=lambda spent: WireBudget(rate, 0, spent=spent)) as agent:
        await asyncio.wait_for(agent.wait_connected(), 10)
        started = time.monotonic()
        for n in range(5):  # batches of ~70 kB, under a second's worth each
            app.executemany("INSERT INTO device_state VALUES (?, ?)",
                            [(n * 400 + i, "n" * 150) for i in range(400)])
            assert await agent.flush() == 400
        took = time.monotonic() - started
        spent = agent._on_wire().budget.spent_today
    assert spent > 3 * rate
    # The first second's worth came from the full bucket; generous on the slow side.
    assert (spent - rate) / rate * 0.9 <= took <= (spent - rate) / rate + 5


async def test_a_paced_backlog_never_holds_the_status_report_back(
        app: sqlite3.Connection, source_db: Path, tmp_path: Path, device_id: str) -> None:
    app.execute("CREATE TABLE device_state (id INTEGER PRIMARY KEY, note TEXT)")
    cfg = make_config(device_id, source_db, tmp_path)
    sent: list[str] = []
    async with Agent(cfg, budget=lambda spent: WireBudget(400_000, 0, spent=spent)) as agent:
        await asyncio.wait_for(agent.wait_connected(), 10)
        assert agent._device is not None
        agent._device.status.interval_s = 0.0  # a report due at every chance
        publish = agent._link.publish

        async def recording(topic: str, payload: bytes) -> None:
            await publish(topic, payload)
            sent.append(topic.rsplit("/sync/", 1)[1])

        agent._link.publish = recording  # type: ignore[method-assign]
        app.executemany("INSERT INTO device_state VALUES (?, ?)",  # three batches' worth
                        [(i, "n" * 150) for i in range(10_000)])
        assert await agent.flush() == 10_000
    batches = [i for i, kind in enumerate(sent) if kind == "rows/batch"]
    assert len(batches) >= 3
    assert "ingest/request" in sent[batches[0]:batches[1]]  # a report between two batches


# ------------------------------------------------------------------ a pushed policy


def test_a_pushed_policy_sets_compression_priority_and_budget(tmp_path: Path) -> None:
    cfg, errors = parse_config({
        "connection": {"server_url": "mqtt://127.0.0.1:1883", "device_id": "gw"},
        "sqlite-replication": {"source_db_path": str(tmp_path / "app.db"),
                               "state_db_path": str(tmp_path / "state.db"),
                               "remote_policy": True}})
    assert errors == [] and cfg is not None
    state = StateStore(tmp_path / "state.db")
    try:
        remote = RemotePolicy(cfg, state)
        policy = {"control_id": "c1", "control_kind": "sync_policy", "revision": 1,
                  "table_strategies": {"r": {"strategy": "telemetry", "ts_column": "ts",
                                             "priority": 50}},
                  "compression": "zstd", "max_bytes_per_day": 10_000_000}
        assert remote.receive(policy)
        got = remote.config()
        assert got.replication.compression is Compression.ZSTD
        assert got.replication.strategy_for("r").rank == 50
        assert (got.connection.max_bytes_per_second, got.connection.max_bytes_per_day) == (
            0, 10_000_000)  # a budget the policy does not give stays the YAML's
        # A bad value is refused whole, by the YAML's rule.
        assert not remote.receive({**policy, "revision": 2, "compression": "lz4"})
        assert not remote.receive({**policy, "revision": 2, "max_bytes_per_second": -1})
        assert remote.config() == got
        # Kept across a restart; detached: the YAML's again.
        assert RemotePolicy(cfg, state).config() == got
        assert remote.receive({"control_id": "c3", "revision": 3, "table_strategies": None})
        assert remote.config() == cfg
    finally:
        state.close()


def test_a_report_without_the_wire_figures_is_still_accepted() -> None:
    plain = {"format_version": 1, "request_kind": "status", "state": "running",
             "journal_depth": 3}
    report = parse_status(plain)
    assert isinstance(report, StatusReport) and report.doc == {"journal_depth": 3}
    full = parse_status({**plain, "bytes_sent": 10, "budget_left_bytes": None,
                         "backlog_by_table": {"t": 4}, "something_new": [1]})
    assert isinstance(full, StatusReport)
    assert full.doc == {"journal_depth": 3, "bytes_sent": 10, "backlog_by_table": {"t": 4}}
    assert parse_status({**plain, "backlog_by_table": {"t": -1}}) == (
        "backlog_by_table must map table names to row counts >= 0")


async def test_a_pushed_budget_reaches_the_running_agent(
        app: sqlite3.Connection, source_db: Path, tmp_path: Path, device_id: str) -> None:
    app.execute("CREATE TABLE device_state (id INTEGER PRIMARY KEY, mode TEXT)")
    cfg = make_config(device_id, source_db, tmp_path, remote_policy=True)
    root = cfg.connection.root_topic
    async with observer(device_id) as obs, Agent(cfg) as agent:
        await asyncio.wait_for(agent.wait_connected(), 10)
        await send_control(obs, root, {"control_id": "p-1", "control_kind": "sync_policy",
                                       "revision": 1, "table_strategies": {},
                                       "max_bytes_per_day": 1, "compression": "zstd"})
        for _ in range(250):
            if agent.config.connection.max_bytes_per_day == 1:
                break
            await asyncio.sleep(0.02)
        app.execute("INSERT INTO device_state VALUES (1, 'idle')")
        await agent.flush()  # the schema observation spends the byte
        assert await agent.flush() == 0  # data waits for the next day
        wire = agent._on_wire()
        assert (wire.budget.per_day, wire.compression) == (1, Compression.ZSTD)
