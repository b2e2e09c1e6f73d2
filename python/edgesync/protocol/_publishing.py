"""The worker's downlink connection: MQTT 3.1.1, publish-only, QoS 1, written by hand.

The worker sends a fleet about one message per device per second (progress
confirmations, controls); at 10,000 devices each confirmation covers about one batch,
so a downlink message costs as much as it saves nowhere else. Measured side by side
on this machine (``benches/bench_downlink.py``): ~145 µs of CPU a message through
``aiomqtt.Client.publish`` (a pending-call future and an event each, and a scan of
the pending calls), ~70 µs handed to paho directly (paho builds and parses each
packet in Python objects), and a few µs here. A connection that only publishes needs
five packets — CONNECT/CONNACK, PUBLISH/PUBACK at QoS 1, PINGREQ/PINGRESP, and
DISCONNECT — so they are written here, and this one class is the downlink's seam:

* ``publish_all`` writes the messages of a call in one ``write`` and waits for all
  their PUBACKs; at most ``window`` wait at once, the others wait here for room. Calls
  write one after the other, so messages leave in call order (each device's controls
  keep their sig_seq order);
* a lost connection fails every publish still waiting and ``wait_closed`` raises; there
  is no reconnect here: ``MqttPublisher``'s session loop opens a new client, and a
  publish that failed may still have arrived (the messages are idempotent or
  sequence-checked by the devices);
* the keep-alive: a PINGREQ when nothing was written for half the interval; a broker
  silent for 1.5 intervals is taken for gone.

Errors are ``BrokerError`` (connection refused, lost, or a malformed answer).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import Sequence

from edgesync.errors import BrokerError

__all__ = ["PublishingClient"]

_CONNACK_REFUSALS = {1: "unacceptable protocol version", 2: "client identifier rejected",
                     3: "server unavailable", 4: "bad user name or password",
                     5: "not authorized"}
_PUBACK, _PINGRESP = 0x40, 0xD0
_MAX_REMAINING = 268_435_455  # MQTT's largest packet body


def _remaining_length(n: int) -> bytes:
    out = bytearray()
    while True:
        n, digit = divmod(n, 128)
        out.append(digit | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _string(value: str | bytes) -> bytes:
    raw = value.encode() if isinstance(value, str) else value
    if len(raw) > 0xFFFF:
        raise BrokerError(f"an MQTT string is at most 65,535 bytes, not {len(raw)}")
    return len(raw).to_bytes(2, "big") + raw


def connect_packet(client_id: str, *, keepalive: int, username: str | None,
                   password: str | None) -> bytes:
    """CONNECT, MQTT 3.1.1, clean session."""
    flags = 0x02
    payload = _string(client_id)
    if username is not None:
        flags |= 0x80
        payload += _string(username)
        if password is not None:
            flags |= 0x40
            payload += _string(password)
    body = _string("MQTT") + bytes([4, flags]) + keepalive.to_bytes(2, "big") + payload
    return b"\x10" + _remaining_length(len(body)) + body


def publish_packet(topic: str, payload: bytes, packet_id: int) -> bytes:
    """PUBLISH at QoS 1."""
    head = _string(topic) + packet_id.to_bytes(2, "big")
    size = len(head) + len(payload)
    if size > _MAX_REMAINING:
        raise BrokerError(f"a message on {topic} is too large for MQTT ({size} bytes)")
    return b"\x32" + _remaining_length(size) + head + payload


class PublishingClient:
    def __init__(self, host: str, port: int, *, client_id: str, keepalive: int = 30,
                 username: str | None = None, password: str | None = None,
                 tls_context: ssl.SSLContext | None = None, window: int = 512) -> None:
        self._host, self._port, self._tls = host, port, tls_context
        self._client_id, self._keepalive = client_id, keepalive
        self._username, self._password = username, password
        self._window = asyncio.Semaphore(window)
        # One call writes at a time, so calls leave in call order even when one waits
        # for room (FIFO): a device's messages from two callers keep their order.
        self._writing = asyncio.Lock()
        self._acks: dict[int, asyncio.Future[None]] = {}
        self._next_id = 0
        self._writer: asyncio.StreamWriter | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._closed: asyncio.Future[None] | None = None
        self._last_write = self._last_read = 0.0

    async def __aenter__(self) -> PublishingClient:
        try:
            reader, writer = await asyncio.open_connection(
                self._host, self._port, ssl=self._tls,
                server_hostname=self._host if self._tls else None)
        except (OSError, ssl.SSLError) as exc:
            raise BrokerError(f"cannot connect to {self._host}:{self._port}: {exc}") from exc
        try:
            writer.write(connect_packet(self._client_id, keepalive=self._keepalive,
                                        username=self._username, password=self._password))
            async with asyncio.timeout(max(10, self._keepalive)):
                connack = await reader.readexactly(4)
        except (OSError, EOFError, TimeoutError) as exc:
            writer.close()
            raise BrokerError(f"{self._host}:{self._port} did not answer CONNECT: "
                              f"{exc or type(exc).__name__}") from exc
        if connack[:2] != b"\x20\x02" or connack[3] != 0:
            writer.close()
            why = _CONNACK_REFUSALS.get(connack[3], f"CONNACK {connack!r}")
            raise BrokerError(f"{self._host}:{self._port} refused the connection: {why}")
        self._writer = writer
        self._closed = asyncio.get_running_loop().create_future()
        self._last_write = self._last_read = time.monotonic()
        self._tasks = [asyncio.create_task(self._read(reader), name="edgesync.mqtt.read"),
                       asyncio.create_task(self._keep_alive(), name="edgesync.mqtt.ping")]
        return self

    async def __aexit__(self, *exc: object) -> None:
        writer = self._writer
        if writer is not None and not writer.is_closing():
            with contextlib.suppress(OSError):
                writer.write(b"\xe0\x00")  # DISCONNECT
        self._lost(BrokerError("the connection was closed"))
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if writer is not None:
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()
        if self._closed is not None and self._closed.done() and not self._closed.cancelled():
            self._closed.exception()  # retrieved: the reason was given to every waiter

    async def wait_closed(self) -> None:
        """Return never while connected; raise the reason once the connection is lost."""
        assert self._closed is not None, "not connected"
        await asyncio.shield(self._closed)

    async def publish_all(self, messages: Sequence[tuple[str, bytes]]) -> None:
        """Publish each ``(topic, payload)`` at QoS 1, in order; returns once the broker
        acknowledged every one. Raises ``BrokerError`` when the connection is lost
        first (some may have arrived)."""
        waits: list[asyncio.Future[None]] = []
        try:
            async with self._writing:
                at = 0
                while at < len(messages):
                    # As many as there is room for, in one write; then wait for room.
                    await self._window.acquire()
                    packets = []
                    while True:
                        topic, payload = messages[at]
                        packets.append(self._packet(topic, payload, waits))
                        at += 1
                        if at == len(messages) or self._window.locked():
                            break
                        await self._window.acquire()  # free: does not yield
                    self._write(b"".join(packets))
            if waits:
                await asyncio.gather(*waits)
        except BaseException:
            for fut in waits:
                if fut.done() and not fut.cancelled():
                    fut.exception()  # retrieved: the first failure is the one raised
                fut.cancel()
            raise

    def _packet(self, topic: str, payload: bytes, waits: list[asyncio.Future[None]]) -> bytes:
        if self._writer is None or self._closed is None or self._closed.done():
            self._window.release()
            raise BrokerError("the connection to the broker is lost")
        packet_id = self._next_id % 0xFFFF + 1
        while packet_id in self._acks:  # in use still (a window past 65,535 never is)
            packet_id = packet_id % 0xFFFF + 1
        self._next_id = packet_id
        try:
            packet = publish_packet(topic, payload, packet_id)
        except BaseException:
            self._window.release()
            raise
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        fut.add_done_callback(lambda _: self._window.release())
        self._acks[packet_id] = fut
        waits.append(fut)
        return packet

    def _write(self, data: bytes) -> None:
        assert self._writer is not None
        self._writer.write(data)
        self._last_write = time.monotonic()

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                head = await reader.readexactly(2)
                if head[1] & 0x80:
                    raise BrokerError(f"unexpected packet from the broker: {head!r}")
                body = await reader.readexactly(head[1]) if head[1] else b""
                self._last_read = time.monotonic()
                kind = head[0] & 0xF0
                if kind == _PUBACK and len(body) == 2:
                    fut = self._acks.pop(int.from_bytes(body, "big"), None)
                    if fut is not None and not fut.done():
                        fut.set_result(None)
                elif kind != _PINGRESP:
                    raise BrokerError(f"unexpected packet from the broker: {head!r}")
        except asyncio.CancelledError:
            raise
        except BrokerError as exc:
            self._lost(exc)
        except Exception as exc:
            self._lost(BrokerError(f"the connection to the broker is lost: "
                                   f"{exc or type(exc).__name__}"))

    async def _keep_alive(self) -> None:
        if self._keepalive <= 0:
            return
        while True:
            await asyncio.sleep(self._keepalive / 2)
            now = time.monotonic()
            if now - self._last_read > self._keepalive * 1.5:
                self._lost(BrokerError(f"the broker sent nothing for {self._keepalive * 1.5:g}s"))
                return
            if now - self._last_write >= self._keepalive / 2:
                with contextlib.suppress(OSError):
                    self._write(b"\xc0\x00")  # PINGREQ

    def _lost(self, exc: BrokerError) -> None:
        if self._closed is not None and not self._closed.done():
            self._closed.set_exception(exc)
        acks, self._acks = self._acks, {}
        for fut in acks.values():
            if not fut.done():
                fut.set_exception(exc)
        if self._writer is not None:
            self._writer.close()

    @property
    def waiting(self) -> int:
        """Publishes waiting for their PUBACK."""
        return len(self._acks)
