"""PublishingClient: the worker's publish-only QoS 1 connection, against the real
Mosquitto and against small fake brokers for what a real one will not do on cue."""

from __future__ import annotations

import asyncio
import getpass
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import aiomqtt
import pytest
from kits.e2e_kit import eventually
from kits.fault_kit import MOSQUITTO, free_port

from edgesync.errors import BrokerError
from edgesync.protocol import PublishingClient

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def fake_broker(handler: Handler) -> AsyncIterator[int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


async def test_publish_all_delivers_every_message_in_order() -> None:
    topic = f"edgesync-test/publishing/{uuid.uuid4().hex}"
    n = 600  # past the window: the rest waits for room, in order
    async with aiomqtt.Client("127.0.0.1", 1883, identifier=f"sub-{uuid.uuid4().hex}") as sub:
        await sub.subscribe(topic, qos=1)
        client = PublishingClient("127.0.0.1", 1883, client_id=f"pub-{uuid.uuid4().hex}",
                                  window=64)
        async with client:
            first = asyncio.create_task(client.publish_all(
                [(topic, str(i).encode()) for i in range(n)]))
            await asyncio.sleep(0)  # the first call starts: 64 written, it waits for room
            assert not first.done() and client.waiting == 64
            # A second caller meanwhile: its message leaves after all of the first's.
            await client.publish_all([(topic, b"second")])
            await first
            assert client.waiting == 0  # every PUBACK came back
        got: list[bytes] = []
        async with asyncio.timeout(30):
            async for message in sub.messages:
                assert isinstance(message.payload, bytes)
                got.append(message.payload)
                if len(got) == n + 1:
                    break
    assert got == [str(i).encode() for i in range(n)] + [b"second"]


async def test_a_broker_that_hangs_up_fails_the_waiting_publishes() -> None:
    received = asyncio.Event()

    async def broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)  # CONNECT
        writer.write(b"\x20\x02\x00\x00")  # CONNACK, accepted
        await writer.drain()
        await reader.read(1024)  # PUBLISHes, never acknowledged
        received.set()
        writer.close()

    async with fake_broker(broker) as port:
        client = PublishingClient("127.0.0.1", port, client_id="hang-up")
        async with client:
            with pytest.raises(BrokerError, match="lost"):
                async with asyncio.timeout(30):
                    await client.publish_all([("t/a", b"1"), ("t/b", b"2")])
            assert received.is_set() and client.waiting == 0
            with pytest.raises(BrokerError):
                await client.wait_closed()
            with pytest.raises(BrokerError, match="lost"):  # no writing on a lost connection
                await client.publish_all([("t/c", b"3")])


async def test_a_refused_connection_says_why() -> None:
    async def broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)
        writer.write(b"\x20\x02\x00\x04")  # CONNACK: bad user name or password
        await writer.drain()
        await reader.read(1024)  # until the client hangs up
        writer.close()

    async with fake_broker(broker) as port:
        with pytest.raises(BrokerError, match="bad user name or password"):
            async with PublishingClient("127.0.0.1", port, client_id="refused"):
                pass
    with pytest.raises(BrokerError, match="cannot connect"):
        async with PublishingClient("127.0.0.1", free_port(), client_id="nobody"):
            pass


async def test_a_silent_broker_is_taken_for_gone() -> None:
    """Keep-alive: PINGREQs go out when idle; no answer for 1.5 intervals ends it."""
    pings = 0

    async def broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal pings
        await reader.read(1024)
        writer.write(b"\x20\x02\x00\x00")
        await writer.drain()
        while data := await reader.read(1024):
            pings += data.count(b"\xc0\x00")
        writer.close()

    async with fake_broker(broker) as port, PublishingClient(
            "127.0.0.1", port, client_id="silent", keepalive=1) as c:
        with pytest.raises(BrokerError, match="sent nothing"):
            async with asyncio.timeout(10):
                await c.wait_closed()
    assert pings >= 1


@pytest.fixture
def password_broker(tmp_path: Path) -> tuple[int, str]:
    """A Mosquitto of the test's own that wants a user name and password."""
    if shutil.which("mosquitto_passwd") is None:
        pytest.fail("mosquitto_passwd (Debian's mosquitto package) is needed by this test")
    secret = uuid.uuid4().hex
    subprocess.run(["mosquitto_passwd", "-b", "-c", str(tmp_path / "passwd"), "worker",
                    secret], check=True, capture_output=True)
    port = free_port()
    (tmp_path / "mosquitto.conf").write_text(
        f"user {getpass.getuser()}\npersistence false\nlog_dest stderr\n"
        f"listener {port} 127.0.0.1\nallow_anonymous false\n"
        f"password_file {tmp_path / 'passwd'}\n")
    return port, secret


async def test_user_name_and_password(password_broker: tuple[int, str], tmp_path: Path) -> None:
    port, secret = password_broker
    log = (tmp_path / "mosquitto.log").open("wb")
    proc = await asyncio.create_subprocess_exec(MOSQUITTO, "-c", str(tmp_path / "mosquitto.conf"),
                                                stdout=log, stderr=log)
    try:
        async def up() -> bool:
            try:
                _, w = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                return False
            w.close()
            return True

        await eventually(up, 30, "mosquitto listening")
        async with PublishingClient("127.0.0.1", port, client_id="worker", username="worker",
                                    password=secret) as client:
            await client.publish_all([("t/x", b"with a password")])
        with pytest.raises(BrokerError, match="refused"):
            async with PublishingClient("127.0.0.1", port, client_id="worker",
                                        username="worker", password="wrong"):
                pass
    finally:
        proc.terminate()
        await proc.wait()
        log.close()
