"""Downlink controls against the real Mosquitto: ACK first, pause/resume, redelivery,
signed controls."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import eventually, make_config, next_message, observer, send_control

from edgesync.agent import Agent
from edgesync.agent._state import StateStore
from edgesync.agent.link._inbox import ControlInbox
from edgesync.errors import ConfigError
from edgesync.protocol import sign_control

TOKEN = "device-secret-token"


def state_row(tmp_path: Path, table: str) -> tuple[int, int | None, int]:
    with sqlite3.connect(tmp_path / "state.db") as db:
        row = db.execute("SELECT paused, server_watermark, last_published_commit_seq "
                         "FROM tables WHERE source_table=?", (table,)).fetchone()
    db.close()
    return row  # type: ignore[no-any-return]


def journal_count(app: sqlite3.Connection) -> int:
    return int(app.execute("SELECT count(*) FROM __edgesync_journal").fetchone()[0])


async def test_pause_then_resume_drains_from_the_watermark(
        app: sqlite3.Connection, source_db: Path, tmp_path: Path, device_id: str) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    app.execute("CREATE TABLE other (id INTEGER PRIMARY KEY)")
    cfg = make_config(device_id, source_db, tmp_path)
    root = cfg.connection.root_topic
    async with observer(device_id) as obs, Agent(cfg) as agent:
        await obs.subscribe(f"{root}/sync/#", qos=1)
        app.executemany("INSERT INTO t VALUES (?, 'a')", [(i,) for i in range(1, 4)])
        assert await agent.flush() == 3  # commit_seq 1..3
        await next_message(obs, f"{root}/sync/rows/batch")

        await send_control(obs, root, {"control_id": "p1", "control_kind": "pause_lineage",
                                       "source_table": "t", "server_watermark": 2,
                                       "reason": "backpressure: staged row cap exceeded"})
        assert (await next_message(obs, f"{root}/sync/ingest/ack")) == {
            "format_version": 1, "control_id": "p1"}
        await eventually(lambda: state_row(tmp_path, "t")[0] == 1)
        assert state_row(tmp_path, "t")[:2] == (1, 2)

        # paused: t is journaled but not published; other tables keep going
        app.executemany("INSERT INTO t VALUES (?, 'b')", [(i,) for i in range(4, 6)])
        app.execute("INSERT INTO other VALUES (1)")
        assert await agent.flush() == 1
        assert (await next_message(obs, f"{root}/sync/rows/batch"))["source_table"] == "other"
        assert journal_count(app) == 6

        await send_control(obs, root, {"control_id": "r1", "control_kind": "resume_lineage",
                                       "source_table": "t", "server_watermark": 2})
        assert (await next_message(obs, f"{root}/sync/ingest/ack"))["control_id"] == "r1"
        await eventually(lambda: state_row(tmp_path, "t")[0] == 0)
        assert await agent.flush() == 3  # commit_seq 3 (after the watermark), 4, 5
        doc = await next_message(obs, f"{root}/sync/rows/batch")
        assert doc["source_table"] == "t"
        assert [r["commit_seq"] for r in doc["rows"]] == [3, 4, 5]


async def test_redelivered_control_is_acked_again_not_executed_again(
        app: sqlite3.Connection, source_db: Path, tmp_path: Path, device_id: str) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    cfg = make_config(device_id, source_db, tmp_path)
    root = cfg.connection.root_topic
    async with observer(device_id) as obs, Agent(cfg) as agent:
        await obs.subscribe(f"{root}/sync/ingest/ack", qos=1)
        app.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(1, 5)])
        assert await agent.flush() == 4
        resume = {"control_id": "r-once", "control_kind": "resume_lineage",
                  "source_table": "t", "server_watermark": 1}
        await send_control(obs, root, resume)
        assert (await next_message(obs, f"{root}/sync/ingest/ack"))["control_id"] == "r-once"
        await eventually(lambda: state_row(tmp_path, "t")[2] == 1)
        assert await agent.flush() == 3  # rewound to the watermark: 2..4 again
        await send_control(obs, root, resume)  # the broker delivers it once more
        assert (await next_message(obs, f"{root}/sync/ingest/ack"))["control_id"] == "r-once"
        await asyncio.sleep(0.2)
        assert state_row(tmp_path, "t")[2] == 4  # not rewound a second time
        assert await agent.flush() == 0


def signed(body: dict[str, Any], seq: int, *, key: str = TOKEN,
           ttl: timedelta = timedelta(minutes=5)) -> dict[str, Any]:
    return sign_control(body, key.encode(), seq=seq, ttl=ttl)


async def test_signed_controls_refuse_unsigned_forged_expired_and_replayed(
        app: sqlite3.Connection, source_db: Path, tmp_path: Path, device_id: str,
        caplog: pytest.LogCaptureFixture) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    cfg = make_config(device_id, source_db, tmp_path, token=TOKEN, signed=True)
    root = cfg.connection.root_topic

    def pause(cid: str) -> dict[str, Any]:
        return {"control_id": cid, "control_kind": "pause_lineage", "source_table": "t",
                "server_watermark": 0}

    async with observer(device_id) as obs, Agent(cfg) as agent:
        await obs.subscribe(f"{root}/sync/ingest/ack", qos=1)
        await agent.wait_connected()
        good = signed({"control_id": "ok-1", "control_kind": "resume_lineage",
                       "source_table": "t", "server_watermark": 0}, seq=10)
        await send_control(obs, root, good)
        assert (await next_message(obs, f"{root}/sync/ingest/ack"))["control_id"] == "ok-1"

        forged = signed(pause("forged"), seq=11, key="not-the-token")
        tampered = dict(signed(pause("tampered"), seq=12), source_table="other")
        expired = signed(pause("expired"), seq=13, ttl=timedelta(seconds=-1))
        replayed = signed(pause("replayed"), seq=10)  # sig_seq not after the last one
        for bad in (pause("unsigned"), forged, tampered, expired, replayed):
            await send_control(obs, root, bad)
        await send_control(obs, root, good)  # redelivery of an accepted control
        await send_control(obs, root, signed(pause("ok-2"), seq=14))
        # Controls are handled in order: had any bad one been acknowledged, its ACK
        # would come before these two.
        assert (await next_message(obs, f"{root}/sync/ingest/ack"))["control_id"] == "ok-1"
        assert (await next_message(obs, f"{root}/sync/ingest/ack"))["control_id"] == "ok-2"
        await eventually(lambda: state_row(tmp_path, "t")[0] == 1)
    for reason in ("unsigned", "bad_signature", "expired", "replayed"):
        assert f"refused ({reason})" in caplog.text
    with sqlite3.connect(tmp_path / "state.db") as db:
        assert db.execute("SELECT value FROM meta WHERE key='last_sig_seq'").fetchone() == (
            "14",)
        ids = {r[0] for r in db.execute("SELECT control_id FROM controls")}
    db.close()
    assert ids == {"ok-1", "ok-2"}


def test_signed_control_needs_a_token(source_db: Path, tmp_path: Path) -> None:
    cfg = make_config("dev", source_db, tmp_path, signed=True)
    with pytest.raises(ConfigError) as info:
        Agent(cfg)
    assert info.value.field == "security.auth_token_env"


async def test_control_accepted_before_a_crash_is_executed_at_restart(
        app: sqlite3.Connection, source_db: Path, tmp_path: Path, device_id: str) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    cfg = make_config(device_id, source_db, tmp_path)
    root = cfg.connection.root_topic
    async with Agent(cfg):
        pass  # registers t
    state = StateStore(tmp_path / "state.db")
    # the agent stored the control, then died before acknowledging or executing it
    assert ControlInbox(state, None).accept(
        b'{"control_id":"c-crash","control_kind":"pause_lineage","source_table":"t",'
        b'"server_watermark":0}') is not None
    state.close()
    assert state_row(tmp_path, "t")[0] == 0
    async with observer(device_id) as obs, Agent(cfg) as agent:
        await obs.subscribe(f"{root}/sync/ingest/ack", qos=1)
        await agent.flush()
        assert (await next_message(obs, f"{root}/sync/ingest/ack"))["control_id"] == "c-crash"
        assert state_row(tmp_path, "t")[0] == 1
