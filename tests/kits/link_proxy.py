"""A bad link between MQTT clients and a broker: a TCP proxy (asyncio) that frames the
MQTT packets going through it, so faults land on packet boundaries or, on purpose,
inside a packet.

What it can do to the connections it carries (each a client's TCP connection, forwarded
on a fresh connection to the broker):

* ``delay_up`` / ``delay_down``: seconds added to every packet client → broker / broker →
  client (order kept: a FIFO per direction, each packet held until its arrival + delay);
* ``stall()``: the connections open now stop forwarding without closing, in both
  directions (half-open TCP: the client's writes still succeed, nothing arrives);
  connections made afterwards flow. ``heal()`` then resets the stalled ones (their peers
  forgot them meanwhile: a reset is what a real peer answers);
* ``reset()``: every open connection reset (RST, not FIN) on both sides;
* ``cut_publish(topic_part)``: the next PUBLISH from a client whose topic contains
  ``topic_part`` is forwarded only up to its middle, then both sides are reset;
* ``drop_puback(topic_part)``: the broker's PUBACK of the next such PUBLISH is dropped
  (the broker took the message, the client never learns it), then both sides are reset.

It counts the bytes each way (``bytes_up``: what clients sent, resends included;
``bytes_down``: what the broker sent), whether or not a fault then dropped them, and the
moments connections were accepted (``accepted``), so a test can tell when a client came
back. Used by tests/links; any fault test may put it in front of a broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Self

__all__ = ["LinkProxy", "mqtt_packets"]

_PUBLISH, _PUBACK = 3, 4
# What a direction's queue carries besides packets: end of stream, reset both sides.
_EOF, _RESET = b"", None


def mqtt_packets(buffer: bytearray) -> list[bytes]:
    """The complete MQTT packets at the start of ``buffer``, removed from it (a packet
    split across reads stays until its rest arrives)."""
    packets: list[bytes] = []
    while len(buffer) >= 2:
        length, shift, at = 0, 0, 1
        while True:
            if at >= len(buffer):
                return packets  # the remaining-length field itself is incomplete
            byte = buffer[at]
            length |= (byte & 0x7F) << shift
            at += 1
            shift += 7
            if not byte & 0x80:
                break
        end = at + length
        if len(buffer) < end:
            return packets
        packets.append(bytes(buffer[:end]))
        del buffer[:end]
    return packets


def _body(packet: bytes) -> bytes:
    at = 1
    while packet[at] & 0x80:
        at += 1
    return packet[at + 1:]


def _publish(packet: bytes) -> tuple[str, int | None]:
    """A PUBLISH's topic and packet id (None at QoS 0)."""
    body = _body(packet)
    (n,) = struct.unpack_from("!H", body)
    topic = body[2:2 + n].decode(errors="replace")
    qos = (packet[0] >> 1) & 3
    return topic, (struct.unpack_from("!H", body, 2 + n)[0] if qos else None)


@dataclass
class _Fault:
    """One armed packet fault: the topic it waits for, and when it happened."""
    topic_part: str
    done: asyncio.Future[float] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())


class _Connection:
    """One client connection and its connection to the broker: a reader and a writer per
    direction, with a FIFO between them."""

    def __init__(self, proxy: LinkProxy, client: tuple[asyncio.StreamReader,
                                                          asyncio.StreamWriter],
                 broker: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
        self.proxy = proxy
        self.client, self.broker = client, broker
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.watched: set[int] = set()  # packet ids whose PUBACK is to be dropped
        self.closed = asyncio.Event()
        up: asyncio.Queue[tuple[float, bytes | None]] = asyncio.Queue()
        down: asyncio.Queue[tuple[float, bytes | None]] = asyncio.Queue()
        self._tasks = [
            asyncio.create_task(self._read(client[0], up, "up")),
            asyncio.create_task(self._write(up, broker[1])),
            asyncio.create_task(self._read(broker[0], down, "down")),
            asyncio.create_task(self._write(down, client[1])),
        ]
        self._ended = 0

    async def _read(self, reader: asyncio.StreamReader,
                    queue: asyncio.Queue[tuple[float, bytes | None]], way: str) -> None:
        buffer = bytearray()
        try:
            while chunk := await reader.read(65536):
                if way == "up":
                    self.proxy.bytes_up += len(chunk)
                else:
                    self.proxy.bytes_down += len(chunk)
                buffer += chunk
                for packet in mqtt_packets(buffer):
                    at = time.monotonic() + (self.proxy.delay_up if way == "up"
                                             else self.proxy.delay_down)
                    for part in self._faults(packet, way):
                        queue.put_nowait((at, part))
        except OSError:
            queue.put_nowait((0.0, _RESET))
            return
        queue.put_nowait((0.0, _EOF))

    def _faults(self, packet: bytes, way: str) -> list[bytes | None]:
        """What goes on for ``packet``: itself, or what a fault makes of it."""
        kind = packet[0] >> 4
        proxy = self.proxy
        if way == "up" and kind == _PUBLISH:
            topic, packet_id = _publish(packet)
            cut = proxy.cut
            if cut is not None and cut.topic_part in topic:
                proxy.cut = None
                cut.done.set_result(time.monotonic())
                return [packet[:len(packet) // 2], _RESET]
            drop = proxy.drop
            if drop is not None and drop.topic_part in topic and packet_id is not None:
                self.watched.add(packet_id)
        if way == "down" and kind == _PUBACK and self.watched:
            (packet_id,) = struct.unpack_from("!H", _body(packet))
            drop = proxy.drop
            if packet_id in self.watched and drop is not None:
                proxy.drop = None
                drop.done.set_result(time.monotonic())
                return [_RESET]
        return [packet]

    async def _write(self, queue: asyncio.Queue[tuple[float, bytes | None]],
                     writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                at, packet = await queue.get()
                await self.flowing.wait()
                if (wait := at - time.monotonic()) > 0:
                    await asyncio.sleep(wait)
                await self.flowing.wait()  # stalled while it waited its delay
                if packet is _RESET:
                    self.reset()
                    return
                if packet == _EOF:
                    if writer.can_write_eof():
                        writer.write_eof()
                    self._ended += 1
                    if self._ended == 2:
                        self.close()
                    return
                writer.write(packet)
                await writer.drain()
        except OSError:
            self.reset()

    def reset(self) -> None:
        """RST both ways: linger 0, then drop the sockets unflushed."""
        for _, writer in (self.client, self.broker):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                    struct.pack("ii", 1, 0))
            writer.transport.abort()
        self._finish()

    def close(self) -> None:
        for _, writer in (self.client, self.broker):
            writer.close()
        self._finish()

    def _finish(self) -> None:
        self.proxy.connections.discard(self)
        self.closed.set()
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()

    async def wait(self) -> None:
        await self.closed.wait()
        await asyncio.gather(*self._tasks, return_exceptions=True)


class LinkProxy:
    """``async with LinkProxy(broker_port) as link``: clients connect to ``link.url``
    (``listen_host`` may be an address a network namespace reaches)."""

    def __init__(self, broker_port: int, *, broker_host: str = "127.0.0.1",
                 listen_host: str = "127.0.0.1") -> None:
        self.broker = (broker_host, broker_port)
        self.listen_host = listen_host
        self.port = 0
        self.delay_up = self.delay_down = 0.0
        self.bytes_up = self.bytes_down = 0
        self.accepted: list[float] = []
        self.resets = 0
        self.connections: set[_Connection] = set()
        self.stalled: set[_Connection] = set()
        self.cut: _Fault | None = None
        self.drop: _Fault | None = None
        self._server: asyncio.Server | None = None
        self._all: set[_Connection] = set()

    @property
    def url(self) -> str:
        return f"mqtt://{self.listen_host}:{self.port}"

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._accept, self.listen_host, 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for conn in list(self._all):
            conn.reset()
        await asyncio.gather(*(c.wait() for c in self._all), return_exceptions=True)
        await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        self.accepted.append(time.monotonic())
        try:
            broker = await asyncio.open_connection(*self.broker)
        except OSError:
            writer.transport.abort()
            return
        conn = _Connection(self, (reader, writer), broker)
        self.connections.add(conn)
        self._all.add(conn)
        await conn.wait()
        self._all.discard(conn)

    def accepted_since(self, moment: float) -> list[float]:
        return [t for t in self.accepted if t >= moment]

    # ------------------------------------------------------------------ faults

    def stall(self) -> int:
        """The open connections stop forwarding (and stay open); returns how many."""
        for conn in self.connections:
            conn.flowing.clear()
        self.stalled |= self.connections
        self.connections = set()
        return len(self.stalled)

    def heal(self) -> None:
        """The stalled connections are reset; new ones flowed all along."""
        for conn in list(self.stalled):
            conn.reset()
        self.stalled.clear()

    def reset(self) -> int:
        """Reset every open (not stalled) connection; returns how many."""
        open_now = list(self.connections)
        for conn in open_now:
            conn.reset()
        self.resets += len(open_now)
        return len(open_now)

    def cut_publish(self, topic_part: str) -> asyncio.Future[float]:
        """Arm: the next PUBLISH on a topic containing ``topic_part`` is cut in half and
        the connection reset. The future is the moment it happened."""
        self.cut = _Fault(topic_part)
        return self.cut.done

    def drop_puback(self, topic_part: str) -> asyncio.Future[float]:
        """Arm: the PUBACK of the next QoS 1 PUBLISH on a topic containing ``topic_part``
        is dropped and the connection reset. The future is the moment it happened."""
        self.drop = _Fault(topic_part)
        return self.drop.done

