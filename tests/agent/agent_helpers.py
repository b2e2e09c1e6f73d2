"""Helpers shared by the agent tests that talk to the real Mosquitto."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiomqtt
import orjson

from edgesync.agent import AgentConfig
from edgesync.agent.config import (
    ConnectionConfig,
    ReplicationConfig,
    SecurityConfig,
)
from edgesync.protocol import TableStrategy, mqtt_client, parse_broker_url

MQTT_URL = os.environ.get("EDGESYNC_TEST_MQTT_URL", "mqtt://127.0.0.1:1883")


def make_config(device_id: str, source: Path, tmp_path: Path, *,
                strategies: dict[str, dict[str, Any]] | None = None,
                token: str | None = None, signed: bool = False,
                **replication: Any) -> AgentConfig:
    return AgentConfig(
        connection=ConnectionConfig(server_url=MQTT_URL, device_id=device_id,
                                    root_topic=f"edgesync-test/{device_id}"),
        security=SecurityConfig(auth_token=token, signed_control=signed),
        replication=ReplicationConfig(
            source_db_path=source, state_db_path=tmp_path / "state.db",
            flush_interval_s=0.2,
            table_strategies={k: TableStrategy(**v)
                              for k, v in (strategies or {}).items()},
            **replication),
    )


def observer(device_id: str) -> aiomqtt.Client:
    return mqtt_client(parse_broker_url(MQTT_URL), identifier=f"{device_id}-observer",
                       clean_session=True)


async def eventually(condition: Callable[[], bool], seconds: float = 10) -> None:
    for _ in range(int(seconds / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached in time")


async def next_message(client: aiomqtt.Client, topic: str, seconds: float = 10
                       ) -> dict[str, Any]:
    """The next message on ``topic``; the agent's periodic status reports (on
    sync/ingest/request too) are passed over: tests/observe/test_freshness.py has them."""
    async with asyncio.timeout(seconds):
        async for msg in client.messages:
            if str(msg.topic) == topic:
                assert isinstance(msg.payload, bytes)
                doc: dict[str, Any] = orjson.loads(msg.payload)
                if doc.get("request_kind") == "status":
                    continue
                return doc
    raise AssertionError("message stream ended")


async def send_control(client: aiomqtt.Client, root: str, doc: dict[str, Any]) -> None:
    await client.publish(f"{root}/sync/ingest/control", orjson.dumps(doc), qos=1)
