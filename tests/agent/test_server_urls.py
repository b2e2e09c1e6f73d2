"""``connection.server_urls``: the nodes of a broker cluster, tried in turn by the link;
``server_url`` still accepted alone; both given is one error naming the keys."""

from __future__ import annotations

import asyncio
import logging
import socket
import textwrap
from pathlib import Path

import pytest

from edgesync.agent import load_config, validate_config
from edgesync.agent.config import ConnectionConfig, summarize_config
from edgesync.agent.link._publisher import MqttLink
from edgesync.errors import ConfigError
from edgesync.protocol import Backoff, parse_broker_url

LIST = """
connection:
  server_urls:
    - mqtt://node1.local:1883
    - mqtts://node2.local
    - tcp://node3.local:1884
  device_id: gw-7
sqlite-replication:
  source_db_path: /var/lib/app/data.db
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "agent.yaml"
    p.write_text(textwrap.dedent(text), encoding="utf-8")
    return p


def test_a_list_of_urls_is_every_node_and_server_url_is_the_first(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, LIST))
    c = cfg.connection
    assert c.server_urls == ("mqtt://node1.local:1883", "mqtts://node2.local",
                             "tcp://node3.local:1884")
    assert c.server_url == "mqtt://node1.local:1883"
    assert [str(b) for b in c.brokers] == ["mqtt://node1.local:1883",
                                           "mqtts://node2.local:8883",
                                           "mqtt://node3.local:1884"]
    assert summarize_config(cfg)[0].startswith(
        "brokers (in turn): mqtt://node1.local:1883, mqtts://node2.local:8883, "
        "mqtt://node3.local:1884 (device gw-7")


def test_server_url_alone_is_a_list_of_one(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, LIST.replace(
        "  server_urls:\n    - mqtt://node1.local:1883\n    - mqtts://node2.local\n"
        "    - tcp://node3.local:1884\n", "  server_url: mqtt://one.local\n")))
    assert cfg.connection.server_urls == ()
    assert [str(b) for b in cfg.connection.brokers] == ["mqtt://one.local:1883"]
    assert summarize_config(cfg)[0].startswith("broker: mqtt://one.local:1883 (device")


@pytest.mark.parametrize("other", ["server_url: mqtt://x.local", "server_url_env: BROKER"])
def test_both_forms_is_one_line_naming_the_keys(tmp_path: Path, other: str) -> None:
    path = write(tmp_path, LIST.replace("  device_id:", f"  {other}\n  device_id:"))
    assert validate_config(path) == [
        "connection.server_urls: give either server_urls (a list) or server_url / "
        "server_url_env (one URL), not both"]


@pytest.mark.parametrize(("urls", "field", "reason"), [
    ("[mqtt://a.local, 'http://b.local']", "connection.server_urls[1]",
     "scheme 'http' not supported"),
    ("mqtt://a.local", "connection.server_urls", "must be a list of strings"),
])
def test_a_bad_list_names_the_item(tmp_path: Path, urls: str, field: str,
                                   reason: str) -> None:
    text = ("connection:\n  server_urls: " + urls + "\n  device_id: gw\n"
            "sqlite-replication:\n  source_db_path: /x.db\n")
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    assert info.value.field == field and reason in info.value.reason


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_the_link_moves_to_the_next_url_when_one_node_is_down(
        mqtt_url: str, unique: str, caplog: pytest.LogCaptureFixture) -> None:
    """The first node refuses connections: the link's next attempt takes the second."""
    caplog.set_level(logging.INFO, "edgesync.agent")
    broker = parse_broker_url(mqtt_url)
    dead = f"mqtt://127.0.0.1:{_closed_port()}"
    live = f"mqtt://{broker.host}:{broker.port}"
    conn = ConnectionConfig(server_url=dead, server_urls=(dead, live),
                            device_id=f"urls-{unique}", root_topic=f"/urls-{unique}",
                            clean_session=True)
    link = MqttLink(conn, lambda _payload: asyncio.sleep(0),
                    backoff=Backoff(base=0.01, cap=0.05))
    task = asyncio.create_task(link.run())
    try:
        await asyncio.wait_for(link.connected.wait(), 20)
        assert f"connected to {live} as urls-{unique}" in caplog.text
        assert f"MQTT broker {dead}:" not in caplog.text  # named by the whole list
        assert f"MQTT broker mqtt://127.0.0.1:{dead.rsplit(':', 1)[1]}, {live}:" in caplog.text
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
