"""``connection.server_urls``: the nodes of a broker cluster, tried in turn by the link;
``server_url`` still accepted alone; both given is one error naming the keys. And a
publish in flight when the node is lost fails at once (the link moves on)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import textwrap
import time
from pathlib import Path

import pytest

from edgesync.agent import load_config, validate_config
from edgesync.agent.config import ConnectionConfig, summarize_config
from edgesync.agent.link._publisher import MqttLink
from edgesync.errors import BrokerError, ConfigError
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


class _Proxy:
    """TCP between the link and the suite's broker; ``hold()`` stops what the broker
    sends from reaching the link (a PUBACK never arrives), ``sever()`` closes it all."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.forward = True
        self.writers: list[asyncio.StreamWriter] = []

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self.writers += [writer, up_writer]

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter,
                       down: bool) -> None:
            with contextlib.suppress(OSError):
                while data := await src.read(65536):
                    if not down or self.forward:
                        dst.write(data)
                        await dst.drain()
            dst.close()

        await asyncio.gather(pump(reader, up_writer, False), pump(up_reader, writer, True))

    def sever(self) -> None:
        for w in self.writers:
            w.close()
        self.writers.clear()


async def test_a_publish_in_flight_fails_when_the_connection_is_lost(
        mqtt_url: str, unique: str) -> None:
    """Not after its 30 s timeout: the next session is a new client (maybe on another node)
    that will never receive the old client's PUBACK."""
    broker = parse_broker_url(mqtt_url)
    proxy = _Proxy(broker.host, broker.port)
    url = f"mqtt://127.0.0.1:{await proxy.start()}"
    conn = ConnectionConfig(server_url=url, device_id=f"inflight-{unique}",
                            root_topic=f"/inflight-{unique}", clean_session=True)
    link = MqttLink(conn, lambda _payload: asyncio.sleep(0), publish_timeout_s=30,
                    backoff=Backoff(base=0.05, cap=0.1))
    task = asyncio.create_task(link.run())
    try:
        await asyncio.wait_for(link.connected.wait(), 20)
        proxy.forward = False
        publishing = asyncio.create_task(link.publish(f"inflight-{unique}/x", b"1"))
        await asyncio.sleep(0.3)
        assert not publishing.done()
        started = time.monotonic()
        proxy.sever()
        with pytest.raises(BrokerError, match="publish to inflight-"):
            await asyncio.wait_for(publishing, 10)
        assert time.monotonic() - started < 5
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        proxy.server.close()
