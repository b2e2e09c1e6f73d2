"""An Agent against the real Mosquitto: batches arrive, progress controls truncate."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiomqtt
import orjson

from edgesync.agent import Agent, AgentConfig
from edgesync.agent.config import ConnectionConfig, ReplicationConfig
from edgesync.protocol import Backoff, mqtt_client, parse_broker_url

MQTT_URL = os.environ.get("EDGESYNC_TEST_MQTT_URL", "mqtt://127.0.0.1:1883")


def make_config(device_id: str, source: Path, tmp_path: Path) -> AgentConfig:
    return AgentConfig(
        connection=ConnectionConfig(server_url=MQTT_URL, device_id=device_id,
                                    root_topic=f"edgesync-test/{device_id}"),
        replication=ReplicationConfig(source_db_path=source,
                                      state_db_path=tmp_path / "state.db",
                                      flush_interval_s=0.2),
    )


async def eventually(condition: Callable[[], bool], seconds: float = 10) -> None:
    for _ in range(int(seconds / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached in time")


def journal_count(app: sqlite3.Connection) -> int:
    return int(app.execute("SELECT count(*) FROM __edgesync_journal").fetchone()[0])


async def next_message(client: aiomqtt.Client, topic: str) -> dict[str, Any]:
    async with asyncio.timeout(10):
        async for msg in client.messages:
            if str(msg.topic) == topic:
                assert isinstance(msg.payload, bytes)
                doc: dict[str, Any] = orjson.loads(msg.payload)
                return doc
    raise AssertionError("message stream ended")


async def test_publish_batch_and_progress_control(app: sqlite3.Connection, source_db: Path,
                                                  tmp_path: Path, device_id: str) -> None:
    app.execute("CREATE TABLE device_state (id INTEGER PRIMARY KEY, mode TEXT, setpoint REAL)")
    cfg = make_config(device_id, source_db, tmp_path)
    root = cfg.connection.root_topic
    observer = mqtt_client(parse_broker_url(MQTT_URL), identifier=f"{device_id}-observer",
                           clean_session=True)
    async with observer:
        await observer.subscribe(f"{root}/sync/#", qos=1)
        async with Agent(cfg) as agent:
            app.execute("INSERT INTO device_state VALUES (1, 'cooling', 21)")
            app.execute("UPDATE device_state SET setpoint = 22 WHERE id = 1")
            async with asyncio.timeout(10):
                assert await agent.flush() == 2
            batch = await next_message(observer, f"{root}/sync/rows/batch")
            assert batch["source_table"] == "device_state"
            assert batch["capture_strategy"] == "sqlite_row_batch_v1"
            assert "schema_columns" in batch and "device_id" not in batch
            assert [(r["commit_seq"], r["op"], r["row"]) for r in batch["rows"]] == [
                (1, "insert", {"id": 1, "mode": "cooling", "setpoint": 22.0}),
                (2, "update", {"id": 1, "mode": "cooling", "setpoint": 22.0}),
            ]
            # PUBACK advanced the cursor but the journal is kept until the cloud confirms
            assert await agent.flush() == 0
            assert journal_count(app) == 2

            control = {"control_id": "ctl-1", "control_kind": "progress",
                       "source_table": "device_state",
                       "journal_epoch": batch["journal_epoch"],
                       "committed": [{"batch_id": batch["batch_id"], "first_commit_seq": 1,
                                      "last_commit_seq": 2}]}
            await observer.publish(f"{root}/sync/ingest/control", orjson.dumps(control), qos=1)
            ack = await next_message(observer, f"{root}/sync/ingest/ack")
            assert ack == {"format_version": 1, "control_id": "ctl-1"}
            # the journal's highest row always stays (commit_seq values are never reused)
            await eventually(lambda: journal_count(app) == 1)

            # wrong epoch: ACKed, nothing deleted
            wrong = dict(control, control_id="ctl-2",
                         journal_epoch="019693d0-0000-7000-8000-000000000000")
            await observer.publish(f"{root}/sync/ingest/control", orjson.dumps(wrong), qos=1)
            assert (await next_message(observer, f"{root}/sync/ingest/ack"))["control_id"] == \
                "ctl-2"
            # other kinds: ACKed, not yet supported
            other = {"control_id": "ctl-3", "control_kind": "url_grant",
                     "presigned_url": "https://example.invalid/x"}
            await observer.publish(f"{root}/sync/ingest/control", orjson.dumps(other), qos=1)
            assert (await next_message(observer, f"{root}/sync/ingest/ack"))["control_id"] == \
                "ctl-3"
            assert journal_count(app) == 1

            # run() publishes on its own every flush_interval
            runner = asyncio.create_task(agent.run(), name="test-agent-run")
            try:
                app.execute("DELETE FROM device_state")
                batch2 = await next_message(observer, f"{root}/sync/rows/batch")
            finally:
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)
            assert "schema_columns" not in batch2
            assert batch2["journal_epoch"] == batch["journal_epoch"]
            assert [(r["commit_seq"], r["op"], r["pk"], r["row"]) for r in batch2["rows"]] == [
                (3, "delete", {"id": 1}, None)]


async def test_new_table_after_start_is_picked_up(app: sqlite3.Connection, source_db: Path,
                                                  tmp_path: Path, device_id: str) -> None:
    app.execute("CREATE TABLE a (id INTEGER PRIMARY KEY)")
    cfg = make_config(device_id, source_db, tmp_path)
    root = cfg.connection.root_topic
    observer = mqtt_client(parse_broker_url(MQTT_URL), identifier=f"{device_id}-observer",
                           clean_session=True)
    async with observer, Agent(cfg) as agent:
        await observer.subscribe(f"{root}/sync/rows/batch", qos=1)
        app.execute("CREATE TABLE b (id INTEGER PRIMARY KEY, v TEXT)")  # DDL while running
        assert await agent.flush() == 0  # notices the schema change, installs triggers
        app.execute("INSERT INTO b VALUES (1, 'x')")
        assert await agent.flush() == 1
        doc = await next_message(observer, f"{root}/sync/rows/batch")
        assert doc["source_table"] == "b" and doc["rows"][0]["row"] == {"id": 1, "v": "x"}


async def test_reconnects_after_the_broker_drops_the_session(
        app: sqlite3.Connection, source_db: Path, tmp_path: Path, device_id: str) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    cfg = make_config(device_id, source_db, tmp_path)
    async with Agent(cfg) as agent:
        async with asyncio.timeout(10):
            await agent.wait_connected()
        # Another client with the same id takes the session over: the broker drops the agent.
        thief = mqtt_client(parse_broker_url(MQTT_URL), identifier=device_id,
                            clean_session=False)
        async with thief:
            await eventually(lambda: not agent.connected)
        app.execute("INSERT INTO t VALUES (1)")
        async with asyncio.timeout(15):
            assert await agent.flush() == 1  # waits for the reconnect, then publishes
        assert agent.connected


def test_backoff_is_exponential_with_jitter() -> None:
    b = Backoff(base=1, cap=8)
    delays = [b.next_delay() for _ in range(6)]
    for d, top in zip(delays, [1, 2, 4, 8, 8, 8], strict=True):
        assert top / 2 <= d <= top
    b.reset()
    assert b.next_delay() <= 1
