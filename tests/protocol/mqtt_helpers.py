"""Brokers for the tests of the hand-written MQTT clients (``PublishingClient``,
``ConsumingClient``): small fake ones, for what a real broker will not do on cue, and a
Mosquitto of the test's own that wants a user name and password."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from kits.e2e_kit import eventually
from kits.fault_kit import MOSQUITTO, free_port

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

CONNACK = b"\x20\x02\x00\x00"  # accepted, no session kept


@contextlib.asynccontextmanager
async def fake_broker(handler: Handler) -> AsyncIterator[int]:
    """A server on a free port that runs ``handler`` for each connection; yields the port."""
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


def _password_file(path: Path) -> str:
    """Mosquitto's password file for user ``worker``; the password."""
    if shutil.which("mosquitto_passwd") is None:
        pytest.fail("mosquitto_passwd (Debian's mosquitto package) is needed by this test")
    secret = uuid.uuid4().hex
    subprocess.run(["mosquitto_passwd", "-b", "-c", str(path), "worker", secret], check=True,
                   capture_output=True)
    return secret


@contextlib.asynccontextmanager
async def password_mosquitto(tmp_path: Path) -> AsyncIterator[tuple[int, str]]:
    """A Mosquitto that wants user ``worker`` and the password yielded with its port."""
    secret = _password_file(tmp_path / "passwd")
    port = free_port()
    (tmp_path / "mosquitto.conf").write_text(
        f"user {getpass.getuser()}\npersistence false\nlog_dest stderr\n"
        f"listener {port} 127.0.0.1\nallow_anonymous false\n"
        f"password_file {tmp_path / 'passwd'}\n")
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
        yield port, secret
    finally:
        proc.terminate()
        await proc.wait()
        log.close()
