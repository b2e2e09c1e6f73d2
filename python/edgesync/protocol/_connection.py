"""One MQTT 3.1.1 connection of the worker's hand-written clients, as an asyncio protocol.

``PublishingClient`` (the downlink) and ``ConsumingClient`` (the uplink) are each one
connection; what they share is here:

* opening it: TCP or TLS (the context decides; the host name is checked), CONNECT, and
  the CONNACK within ``max(10, keepalive)`` seconds; a refusal raises ``BrokerError``
  with MQTT's reason, and ``session_present`` tells whether the broker kept a session;
* framing what the broker sends: every complete packet of a read is handed to
  ``_received`` in that one call (the subclass's packets; CONNACK and PINGRESP are
  handled here), a packet split across reads waits for the rest (a large one is joined
  once, not once per read). A subclass may *hold* the framing (``_hold``): the socket is
  not read any more and what was read stays unframed until ``_release``;
* the keep-alive: a PINGREQ when nothing was written for half the interval; a broker
  silent for 1.5 intervals is taken for gone. Held, the connection does not read on
  purpose, so that time does not count as silence;
* the end: a lost connection, a malformed packet or a silent broker end it once, with a
  ``BrokerError`` that ``wait_closed`` raises and ``_lost`` is told; leaving the
  ``async with`` sends DISCONNECT. There is no reconnect here: the caller's session loop
  opens a new connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from typing import Self, cast

from edgesync.errors import BrokerError
from edgesync.protocol._packets import CONNACK_REFUSALS, DISCONNECT, PINGREQ, connect_packet

__all__ = ["MqttConnection"]

_CONNACK, _PINGRESP = 0x20, 0xD0
# Seconds a closing connection waits for the broker to close its side, then for the
# transport to be done, before it is dropped (a broker gone silent answers neither).
_GOODBYE = 2.0


class MqttConnection(asyncio.Protocol):
    def __init__(self, host: str, port: int, *, client_id: str, clean_session: bool,
                 keepalive: int, username: str | None, password: str | None,
                 tls_context: ssl.SSLContext | None) -> None:
        self._host, self._port, self._tls = host, port, tls_context
        self._connect = connect_packet(client_id, clean_session=clean_session,
                                       keepalive=keepalive, username=username,
                                       password=password)
        self._keepalive = keepalive
        self.session_present = False
        self._transport: asyncio.Transport | None = None
        self._connack: asyncio.Future[None] | None = None
        self._closed: asyncio.Future[None] | None = None  # its exception: why it ended
        self._gone: asyncio.Future[None] | None = None  # the transport's connection_lost
        self._pinging: asyncio.Task[None] | None = None
        self._last_read = self._last_write = 0.0
        # Bytes read and not framed yet: _parts[0] from _at on, then whole parts; _have of
        # them, of the _need the next packet takes (0: its size is not known yet).
        self._parts: list[bytes] = []
        self._at = self._have = self._need = 0
        self._held = False
        self._ending = False  # DISCONNECT sent: what still comes is dropped

    async def __aenter__(self) -> Self:
        loop = asyncio.get_running_loop()
        self._connack = loop.create_future()
        self._closed = loop.create_future()
        self._gone = loop.create_future()
        where = f"{self._host}:{self._port}"
        try:
            await loop.create_connection(lambda: self, self._host, self._port, ssl=self._tls,
                                         server_hostname=self._host if self._tls else None)
        except (OSError, ssl.SSLError) as exc:
            raise BrokerError(f"cannot connect to {where}: {exc}") from exc
        try:
            async with asyncio.timeout(max(10, self._keepalive)):
                await self._connack  # connection_made wrote the CONNECT
        except TimeoutError:
            reason = BrokerError(f"{where} did not answer CONNECT")
            await self._close(reason)
            raise reason from None
        except BaseException as exc:
            await self._close(exc if isinstance(exc, BrokerError)
                              else BrokerError("the connection was closed"))
            raise
        self._pinging = asyncio.create_task(self._keep_alive(), name="edgesync.mqtt.ping")
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            if self._transport is not None and self._gone is not None and self.is_connected:
                self._end()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(_GOODBYE):
                        await asyncio.shield(self._gone)  # the broker closes after DISCONNECT
        finally:
            await self._close(BrokerError("the connection was closed"))

    def _end(self) -> None:
        """DISCONNECT, and read on until the broker closes the connection. Closing it here
        with unread bytes (a held window's, a backlog's) would make the kernel reset it,
        dropping what it had not sent yet: the DISCONNECT, the last PUBACKs."""
        assert self._transport is not None
        self._write(DISCONNECT)
        self._ending = True
        if self._transport.can_write_eof():
            self._transport.write_eof()  # after what is buffered
        if self._held:
            self._transport.resume_reading()

    async def _close(self, reason: BrokerError) -> None:
        self._fail(reason)
        if self._pinging is not None:
            self._pinging.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pinging
        if self._gone is not None and self._transport is not None:
            try:
                async with asyncio.timeout(_GOODBYE):  # what is written goes out first
                    await asyncio.shield(self._gone)
            except TimeoutError:
                self._transport.abort()
        for fut in (self._closed, self._connack):
            if fut is not None and fut.done() and not fut.cancelled():
                fut.exception()  # retrieved: the reason was given to every waiter

    async def wait_closed(self) -> None:
        """Return never while connected; raise the reason once the connection ended."""
        assert self._closed is not None, "not connected"
        await asyncio.shield(self._closed)

    @property
    def is_connected(self) -> bool:
        return self._closed is not None and not self._closed.done()

    def _write(self, data: bytes) -> None:
        if self._transport is not None and self.is_connected and not self._ending:
            self._transport.write(data)
            self._last_write = time.monotonic()

    def _fail(self, reason: BrokerError) -> None:
        """End the connection (once): every waiter gets ``reason``."""
        if self._closed is None or self._closed.done():
            return
        self._closed.set_exception(reason)
        if self._connack is not None and not self._connack.done():
            self._connack.set_exception(reason)
        self._parts = []
        self._lost(reason)
        if self._transport is not None:
            self._transport.close()  # after what is buffered: a DISCONNECT, PUBACKs

    # Hooks of the subclasses.

    def _received(self, first: int, data: bytes, start: int, stop: int) -> None:
        """One packet: ``first`` its first byte, its body ``data[start:stop]``. Raise
        ``BrokerError`` to end the connection."""
        if first == _CONNACK and stop - start == 2 and self._connack is not None \
                and not self._connack.done():
            code = data[start + 1]
            if code:
                why = CONNACK_REFUSALS.get(code, f"CONNACK return code {code}")
                raise BrokerError(f"{self._host}:{self._port} refused the connection: {why}")
            # The broker kept this client id's session (subscriptions, queued messages).
            self.session_present = bool(data[start] & 1)
            self._connack.set_result(None)
        elif first != _PINGRESP:
            raise BrokerError(f"unexpected packet from the broker: type {first >> 4}, "
                              f"flags {first & 15:#x}, {stop - start} bytes")

    def _framed(self) -> None:
        """Every packet of a read was handed to ``_received`` (or the framing is held)."""

    def _lost(self, reason: BrokerError) -> None:
        """The connection ended (called once, before the transport closes)."""

    # Holding the framing, and with it the reading.

    def _hold(self) -> None:
        if not self._held:
            self._held = True
            if self._transport is not None and not self._transport.is_closing():
                self._transport.pause_reading()

    def _release(self) -> None:
        if not self._held:
            return
        self._held = False
        if self._parts:  # read before the hold: it may hold again
            self._reframe()
        if not self._held and self._transport is not None \
                and not self._transport.is_closing():
            self._transport.resume_reading()

    # asyncio.Protocol.

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        self._last_read = time.monotonic()
        self._write(self._connect)

    def connection_lost(self, exc: Exception | None) -> None:
        why = "the broker closed it" if exc is None else str(exc) or type(exc).__name__
        self._fail(BrokerError("the connection was closed") if self._ending
                   else BrokerError(f"the connection to the broker is lost: {why}"))
        if self._gone is not None and not self._gone.done():
            self._gone.set_result(None)

    def data_received(self, data: bytes) -> None:
        self._last_read = time.monotonic()
        if self._ending or not self.is_connected:
            return  # after DISCONNECT, or ended (a malformed packet): not for anyone
        if not self._parts:
            self._frame(data, 0)
            return
        self._parts.append(data)
        self._have += len(data)
        if not self._held and self._have >= self._need:
            self._reframe()

    def _reframe(self) -> None:
        parts, at = self._parts, self._at
        if len(parts) > 1:
            data, at = b"".join([parts[0][at:], *parts[1:]]), 0
        else:
            data = parts[0]
        self._parts = []
        self._frame(data, at)

    def _frame(self, data: bytes, at: int) -> None:
        """Hand every complete packet of ``data`` from ``at`` on to ``_received``."""
        end, need = len(data), 0
        try:
            while at < end and not self._held:
                if at + 2 > end:
                    break
                # The remaining length: 1 to 4 bytes, 7 bits each, least significant first.
                length, head = data[at + 1], 2
                if length > 127:
                    length, shift = length & 127, 7
                    while True:
                        if at + head >= end:
                            length = -1  # the length itself is not all here yet
                            break
                        digit = data[at + head]
                        head += 1
                        length |= (digit & 127) << shift
                        if digit < 128:
                            break
                        if head == 5:
                            raise BrokerError("a malformed packet length from the broker")
                        shift += 7
                    if length < 0:
                        break
                if at + head + length > end:
                    need = head + length
                    break
                self._received(data[at], data, at + head, at + head + length)
                at += head + length
        except BrokerError as exc:
            self._fail(exc)
            return
        except (IndexError, UnicodeDecodeError) as exc:
            self._fail(BrokerError(f"a malformed packet from the broker: {exc}"))
            return
        if at < end and self.is_connected:
            self._parts, self._at, self._have, self._need = [data], at, end - at, need
        self._framed()

    async def _keep_alive(self) -> None:
        if self._keepalive <= 0:
            return
        while True:
            await asyncio.sleep(self._keepalive / 2)
            now = time.monotonic()
            if self._held:
                self._last_read = now  # unread on purpose, not silence
            if now - self._last_read > self._keepalive * 1.5:
                self._fail(BrokerError(f"the broker sent nothing for "
                                       f"{self._keepalive * 1.5:g}s"))
                return
            if now - self._last_write >= self._keepalive / 2:
                self._write(PINGREQ)
