"""The worker's downlink connection: MQTT 3.1.1, publish-only, QoS 1, written by hand.

The worker sends a fleet about one message per device per second (progress
confirmations, controls); at 10,000 devices each confirmation covers about one batch,
so a downlink message costs as much as it saves nowhere else. Measured side by side
on this machine (``benches/bench_downlink.py``): ~145 µs of CPU a message through
``aiomqtt.Client.publish`` (a pending-call future and an event each, and a scan of
the pending calls), ~70 µs handed to paho directly (paho builds and parses each
packet in Python objects), and a few µs here. A connection that only publishes needs
five packets — CONNECT/CONNACK, PUBLISH/PUBACK at QoS 1, PINGREQ/PINGRESP, and
DISCONNECT — so they are written by hand (the connection itself, shared with the
uplink's ``ConsumingClient``, is ``MqttConnection``), and this one class is the
downlink's seam:

* ``publish_all`` writes the messages of a call in one ``write`` and waits for all
  their PUBACKs; at most ``window`` wait at once, the others wait here for room. Calls
  write one after the other, so messages leave in call order (each device's controls
  keep their sig_seq order);
* a lost connection fails every publish still waiting and ``wait_closed`` raises; there
  is no reconnect here: ``MqttPublisher``'s session loop opens a new client, and a
  publish that failed may still have arrived (the messages are idempotent or
  sequence-checked by the devices);
* the keep-alive (``MqttConnection``'s): a PINGREQ when nothing was written for half
  the interval; a broker silent for 1.5 intervals is taken for gone.

Errors are ``BrokerError`` (connection refused, lost, or a malformed answer).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Sequence

from edgesync.errors import BrokerError
from edgesync.protocol._connection import MqttConnection
from edgesync.protocol._packets import publish_packet

__all__ = ["PublishingClient"]

_PUBACK = 0x40


class PublishingClient(MqttConnection):
    def __init__(self, host: str, port: int, *, client_id: str, keepalive: int = 30,
                 username: str | None = None, password: str | None = None,
                 tls_context: ssl.SSLContext | None = None, window: int = 512) -> None:
        super().__init__(host, port, client_id=client_id, clean_session=True,
                         keepalive=keepalive, username=username, password=password,
                         tls_context=tls_context)
        self._window = asyncio.Semaphore(window)
        # One call writes at a time, so calls leave in call order even when one waits
        # for room (FIFO): a device's messages from two callers keep their order.
        self._writing = asyncio.Lock()
        self._acks: dict[int, asyncio.Future[None]] = {}
        self._next_id = 0

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
        if not self.is_connected:
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

    def _received(self, first: int, data: bytes, start: int, stop: int) -> None:
        if first == _PUBACK and stop - start == 2:
            fut = self._acks.pop(data[start] << 8 | data[start + 1], None)
            if fut is not None and not fut.done():
                fut.set_result(None)
        else:
            super()._received(first, data, start, stop)

    def _lost(self, reason: BrokerError) -> None:
        acks, self._acks = self._acks, {}
        for fut in acks.values():
            if not fut.done():
                fut.set_exception(reason)

    @property
    def waiting(self) -> int:
        """Publishes waiting for their PUBACK."""
        return len(self._acks)
