"""An MQTT client that acknowledges a message only when told to, and can stop reading.

aiomqtt acknowledges (PUBACK) each QoS 1 message as paho receives it, and queues what
it reads without bound. A worker that must acknowledge only after its transaction
committed, and hold no more than its in-flight window, needs both changed; aiomqtt has
no public API for either, so this one class reaches into it (aiomqtt 2.x, paho 2.x):

* paho's ``manual_ack`` is switched on before connecting; ``finished(message)`` sends
  the PUBACK later;
* every message received counts as unfinished until ``finished``; at ``window``
  unfinished, the socket's reader callback (registered here, as aiomqtt does, and
  kept) is taken off the event loop — at once, as the message arrives — and put back
  once a quarter of the window is free. Meanwhile the broker's messages wait in the
  broker (or in TCP buffers). MQTT 3.1.1 has no receive maximum, so this is the only
  bound that holds with every broker. While paused, no SUBACK is read either: a
  persistent session's messages come right after the CONNACK, so subscribe while
  consuming them (``MqttIngest`` does).
* paho reads a packet with three or more ``recv`` calls (the type byte, each length
  byte, the body) and one packet per wakeup; the socket is wrapped so that one ``recv``
  of up to 64 KiB feeds every packet it holds (``_BufferedSocket``), read in one wakeup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aiomqtt
import paho.mqtt.client as paho

__all__ = ["AckingClient"]

_READ_SIZE = 65536


class _BufferedSocket:
    """paho's socket, read ahead: ``recv`` is served from what one large read returned.
    Everything else is the socket's own."""

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self._buffer = b""
        self._at = 0

    def recv(self, bufsize: int) -> bytes:
        if self._at >= len(self._buffer):
            data = self._sock.recv(_READ_SIZE)  # BlockingIOError and EOF (b"") as paho expects
            if len(data) <= bufsize:
                return bytes(data)
            self._buffer, self._at = data, 0
        chunk = self._buffer[self._at:self._at + bufsize]
        self._at += len(chunk)
        return chunk

    def pending(self) -> int:
        """Bytes read and not yet taken (plus, on TLS, bytes decrypted and not read)."""
        inner = getattr(self._sock, "pending", None)
        return len(self._buffer) - self._at + (inner() if inner is not None else 0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class AckingClient(aiomqtt.Client):
    def __init__(self, *args: Any, window: int = 256, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._client.manual_ack_set(True)
        self._window = window
        self._reader: Callable[[], None] | None = None
        self._fd = -1
        self._paused = False
        self.unfinished = 0
        self.most_unfinished = 0
        self.session_present = False
        self._buffered: _BufferedSocket | None = None

    def finished(self, message: aiomqtt.Message, *, ack: bool = True) -> None:
        """Done with ``message``: PUBACK it (QoS 1; with ``ack``), and let the window
        take another."""
        if ack and message.qos > 0 and self._client.is_connected():
            self._client.ack(message.mid, message.qos)
        self.unfinished -= 1
        if self._paused and self.unfinished <= self._window * 3 // 4:
            self.resume_reading()

    @property
    def reading_paused(self) -> bool:
        return self._paused

    def _on_connect(self, client: paho.Client, userdata: Any, flags: Any,
                    reason_code: Any, properties: Any = None) -> None:
        # The broker kept this client's session (and its subscriptions) from before.
        self.session_present = bool(getattr(flags, "session_present", False))
        super()._on_connect(client, userdata, flags, reason_code, properties)

    def _on_message(self, client: paho.Client, userdata: Any, message: Any) -> None:
        super()._on_message(client, userdata, message)
        self.unfinished += 1
        self.most_unfinished = max(self.most_unfinished, self.unfinished)
        if self.unfinished >= self._window:
            self.pause_reading()

    def pause_reading(self) -> None:
        if not self._paused:
            self._paused = True
            if self._fd > -1:
                self._loop.remove_reader(self._fd)

    def resume_reading(self) -> None:
        if self._paused:
            self._paused = False
            if self._fd > -1 and self._reader is not None:
                self._loop.add_reader(self._fd, self._reader)
                if self._buffered is not None and self._buffered.pending():
                    # Read ahead before the pause: the socket may never wake for it.
                    self._loop.call_soon(self._reader)

    def _on_socket_open(self, client: paho.Client, userdata: Any,
                        sock: Any) -> None:
        buffered = self._buffered = _BufferedSocket(sock)
        client._sock = buffered

        def read() -> None:
            # As aiomqtt's own callback: a read error means the connection broke.
            try:
                # Every packet already read ahead, unless the window fills meanwhile.
                while True:
                    client.loop_read()
                    if (self._paused or client._sock is not buffered
                            or not buffered.pending()):
                        break
            except Exception as exc:
                if not self._disconnected.done():
                    self._disconnected.set_exception(exc)

        def opened(fd: int) -> None:
            self._fd, self._reader = fd, read
            if not self._paused:
                self._loop.add_reader(fd, read)
            self._misc_task = self._loop.create_task(self._misc_loop())

        # paho calls this from the thread that runs connect().
        self._loop.call_soon_threadsafe(opened, sock.fileno())

    def _on_socket_register_write(self, client: paho.Client, userdata: Any,
                                  sock: Any) -> None:
        def write() -> None:
            try:
                client.loop_write()
            except Exception as exc:
                if not self._disconnected.done():
                    self._disconnected.set_exception(exc)

        def register(fd: int) -> None:
            # A PUBACK sent as the connection drops: the socket may be closed by now.
            if fd == self._fd:
                self._loop.add_writer(fd, write)

        self._loop.call_soon_threadsafe(register, sock.fileno())

    def _on_socket_close(self, client: paho.Client, userdata: Any,
                         sock: Any) -> None:
        self._fd, self._reader, self._buffered = -1, None, None
        super()._on_socket_close(client, userdata, sock)

