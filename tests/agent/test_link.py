"""The agent's MQTT link against the suite's broker, through a proxy that can hold back
what the broker sends or cut the connection: a publish waiting for its PUBACK fails at
once when the connection is lost, also while a control handler is busy, and a stop ends
the link even when a handler swallowed it (Python 3.11's ``wait_for`` in aiomqtt's
publish does, when the PUBACK comes in the same turn as the cancel)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import NoReturn

import pytest
from agent_helpers import observer

from edgesync.agent.config import ConnectionConfig
from edgesync.agent.link._publisher import MqttLink
from edgesync.errors import BrokerError
from edgesync.protocol import Backoff, parse_broker_url

LIMIT = 30  # hang guard of the waits below, never a timing assertion


class _Proxy:
    """TCP between the link and the suite's broker; ``forward = False`` stops what the
    broker sends from reaching the link (a PUBACK never arrives), ``sever()`` closes it all."""

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


@contextlib.asynccontextmanager
async def running_link(mqtt_url: str, name: str,
                       on_control: Callable[[bytes], Awaitable[None]]
                       ) -> AsyncIterator[tuple[MqttLink, _Proxy, asyncio.Task[NoReturn]]]:
    broker = parse_broker_url(mqtt_url)
    proxy = _Proxy(broker.host, broker.port)
    url = f"mqtt://127.0.0.1:{await proxy.start()}"
    conn = ConnectionConfig(server_url=url, device_id=name, root_topic=f"/{name}",
                            clean_session=True)
    link = MqttLink(conn, on_control, publish_timeout_s=30,
                    backoff=Backoff(base=0.05, cap=0.1))
    task = asyncio.create_task(link.run())
    try:
        await asyncio.wait_for(link.connected.wait(), 20)
        yield link, proxy, task
    finally:
        task.cancel()
        await asyncio.wait({task}, timeout=LIMIT)
        proxy.server.close()


async def _fails_at_once(link: MqttLink, proxy: _Proxy, topic: str) -> None:
    proxy.forward = False
    publishing = asyncio.create_task(link.publish(topic, b"1"))
    await asyncio.sleep(0.3)
    assert not publishing.done()
    started = time.monotonic()
    proxy.sever()
    with pytest.raises(BrokerError, match="publish to "):
        await asyncio.wait_for(publishing, 10)
    assert time.monotonic() - started < 5


async def test_a_publish_in_flight_fails_when_the_connection_is_lost(
        mqtt_url: str, unique: str) -> None:
    """Not after its 30 s timeout: the next session is a new client (maybe on another node)
    that will never receive the old client's PUBACK."""
    async with running_link(mqtt_url, f"inflight-{unique}",
                            lambda _payload: asyncio.sleep(0)) as (link, proxy, _):
        await _fails_at_once(link, proxy, f"inflight-{unique}/x")


async def test_a_publish_fails_at_once_while_a_control_handler_is_busy(
        mqtt_url: str, unique: str) -> None:
    """The handler holds the session (as one waiting for its ack's PUBACK does): the
    connection's loss must still end the publishes waiting on it."""
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(_payload: bytes) -> None:
        entered.set()
        await release.wait()

    async with running_link(mqtt_url, f"busy-{unique}", slow) as (link, proxy, _):
        async with observer(f"busy-{unique}") as obs:
            await obs.publish(link.control_topic, b"{}", qos=1)
        await asyncio.wait_for(entered.wait(), 10)
        await _fails_at_once(link, proxy, f"busy-{unique}/x")


async def test_a_stop_swallowed_by_a_control_handler_still_stops_the_link(
        mqtt_url: str, unique: str) -> None:
    entered = asyncio.Event()
    handled = 0

    async def swallowing(_payload: bytes) -> None:
        nonlocal handled
        entered.set()
        # What wait_for does when the PUBACK comes as the cancel does: it returns.
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(3600)
        handled += 1

    async with running_link(mqtt_url, f"swallow-{unique}", swallowing) as (link, _, task):
        async with observer(f"swallow-{unique}") as obs:
            await obs.publish(link.control_topic, b"{}", qos=1)
        await asyncio.wait_for(entered.wait(), 10)
        task.cancel()
        await asyncio.wait({task}, timeout=LIMIT)
        assert task.done(), "the link went on after its task was cancelled"
        assert task.cancelled()
        assert handled == 1
