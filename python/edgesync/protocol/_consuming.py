"""The worker's uplink connection: MQTT 3.1.1, consuming at QoS 1, written by hand.

The worker acknowledges a device's message only once the transaction holding its effect
committed, and holds no more than its in-flight window whatever the broker queued.
aiomqtt acknowledges on receipt and queues without bound, so the worker used to reach
into it and into paho for both (``AckingClient``); that cost 60-80 µs of CPU a message
(``benches/bench_uplink.py``), the largest piece of per-message Python outside the
database work; 3-7 µs here (docs/benchmarks.md, "Uplink"). A connection that only
consumes needs few packets — CONNECT/CONNACK, SUBSCRIBE/SUBACK, PUBLISH/PUBACK,
PINGREQ/PINGRESP, DISCONNECT — so they are written here (the connection itself, shared
with ``PublishingClient``, is ``MqttConnection``):

* CONNECT keeps the session (clean session off): while the worker is away its messages
  wait in the broker, and ``session_present`` says the broker kept them (and the
  subscriptions). Right after the CONNACK a kept session's backlog arrives, before any
  SUBACK: ``receive`` while ``subscribe`` waits;
* every complete PUBLISH of a read (QoS 0 or 1) becomes an ``MqttMessage``, and ``receive``
  hands all those of a read over at once. QoS 2 is refused: the worker subscribes at
  QoS 1, which a broker never exceeds, so a QoS 2 PUBLISH is a broken broker and ends
  the connection with a ``BrokerError`` (acknowledging it at QoS 1 would be wrong, and
  its exactly-once handshake is not worth having here: the ledger makes redelivery a
  no-op);
* the window: each message counts as unfinished from its arrival until ``finished``.
  At ``window`` unfinished the socket is not read any more, at once (the rest of that
  read waits, unparsed), and reading resumes once a quarter of the window is free, so
  memory is bounded by the window and one read, not by the broker's backlog (MQTT 3.1.1
  has no receive maximum: this is the only bound that holds with every broker). While
  reading waits no SUBACK is read either: that is why ``receive`` runs alongside;
* ``finished(message)`` PUBACKs a QoS 1 message (the PUBACKs of one event-loop turn go
  out in one write); ``finished(message, ack=False)`` only frees its slot, and the
  broker sends the message again on the next connection of this session;
* a lost connection ends ``receive`` (and a waiting ``subscribe``) with the
  ``BrokerError``; the messages not finished are dropped unacknowledged (the broker
  sends them again). There is no reconnect here: ``MqttIngest``'s session loop opens a
  new client.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
from collections.abc import Sequence

from edgesync.errors import BrokerError
from edgesync.protocol._connection import MqttConnection
from edgesync.protocol._packets import subscribe_packet

__all__ = ["ConsumingClient", "MqttMessage"]

_PUBLISH, _SUBACK = 0x30, 0x90
_PUBACK_HEAD = 0x4002_0000  # PUBACK, remaining length 2: a packet id makes it whole
_SUBACK_FAILURE = 0x80


class MqttMessage:
    """One PUBLISH received: ``packet_id`` is 0 at QoS 0."""

    __slots__ = ("packet_id", "payload", "qos", "topic")

    def __init__(self, topic: str, payload: bytes, qos: int, packet_id: int) -> None:
        self.topic, self.payload, self.qos, self.packet_id = topic, payload, qos, packet_id

    def __repr__(self) -> str:
        return (f"MqttMessage({self.topic!r}, {len(self.payload)} bytes, qos={self.qos}, "
                f"packet_id={self.packet_id})")


class ConsumingClient(MqttConnection):
    def __init__(self, host: str, port: int, *, client_id: str, keepalive: int = 30,
                 username: str | None = None, password: str | None = None,
                 tls_context: ssl.SSLContext | None = None, window: int = 256) -> None:
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        super().__init__(host, port, client_id=client_id, clean_session=False,
                         keepalive=keepalive, username=username, password=password,
                         tls_context=tls_context)
        self._window = window
        self._resume_at = window * 3 // 4
        self.unfinished = 0
        self.most_unfinished = 0  # the most ever unfinished at once (the window holds)
        self._ready: list[MqttMessage] = []
        self._waiter: asyncio.Future[None] | None = None
        self._acks: list[int] = []  # PUBACKs of this event-loop turn, packed
        self._subscribing: dict[int, tuple[asyncio.Future[None], Sequence[str]]] = {}
        self._next_id = 0

    @property
    def reading_paused(self) -> bool:
        return self._held

    async def subscribe(self, topic_filters: Sequence[str]) -> None:
        """Subscribe to every filter at QoS 1 (``$share/group/...`` too), in one
        SUBSCRIBE; returns once the SUBACK granted each one. Raises ``BrokerError`` when
        the broker refuses one (naming it) or the connection ends first."""
        if not self.is_connected:
            raise BrokerError("the connection to the broker is lost")
        self._next_id = packet_id = self._next_id % 0xFFFF + 1
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._subscribing[packet_id] = (fut, topic_filters)
        try:
            self._write(subscribe_packet(packet_id, topic_filters, qos=1))
            await fut
        finally:
            self._subscribing.pop(packet_id, None)

    async def receive(self) -> list[MqttMessage]:
        """The messages received since the last call, at least one (waits for them).
        Raises ``BrokerError`` once the connection ended: what was received and not
        handed over yet is dropped, unacknowledged."""
        while not self._ready or not self.is_connected:
            if self._closed is None:
                raise BrokerError("not connected")
            if self._closed.done():
                await self._closed  # raises why it ended
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        ready, self._ready = self._ready, []
        return ready

    def finished(self, message: MqttMessage, *, ack: bool = True) -> None:
        """Done with ``message`` (call once for each): PUBACK it (QoS 1, with ``ack``),
        and let the window take another."""
        if ack and message.qos:
            if not self._acks:
                asyncio.get_running_loop().call_soon(self._send_acks)
            self._acks.append(_PUBACK_HEAD | message.packet_id)
        self.unfinished -= 1
        if self._held and self.unfinished <= self._resume_at:
            self._release()

    async def __aexit__(self, *exc: object) -> None:
        self._send_acks()  # before the DISCONNECT: finished is finished
        await super().__aexit__(*exc)

    def _send_acks(self) -> None:
        acks, self._acks = self._acks, []
        if acks:
            self._write(struct.pack(f">{len(acks)}I", *acks))

    def _received(self, first: int, data: bytes, start: int, stop: int) -> None:
        if first & 0xF0 == _PUBLISH:
            # Topic (2-byte length, UTF-8), the packet id at QoS 1, then the payload.
            qos = (first >> 1) & 3
            topic_end = start + 2 + (data[start] << 8 | data[start + 1])
            body = topic_end + 2 if qos == 1 else topic_end
            if qos > 1 or body > stop:
                why = "QoS 2 (the worker subscribes at QoS 1)" if qos == 2 else "malformed"
                raise BrokerError(f"a PUBLISH from the broker is {why}")
            self._ready.append(MqttMessage(
                data[start + 2:topic_end].decode(), data[body:stop], qos,
                data[topic_end] << 8 | data[topic_end + 1] if qos else 0))
            unfinished = self.unfinished = self.unfinished + 1
            if unfinished > self.most_unfinished:
                self.most_unfinished = unfinished
            if unfinished >= self._window:
                self._hold()  # at once: the rest of this read waits unparsed
        elif first == _SUBACK:
            self._suback(data[start:stop])
        else:
            super()._received(first, data, start, stop)

    def _suback(self, body: bytes) -> None:
        if len(body) < 3:
            raise BrokerError(f"a malformed SUBACK from the broker: {body!r}")
        waiting = self._subscribing.get(body[0] << 8 | body[1])
        if waiting is None or waiting[0].done():
            return  # its subscribe() was cancelled
        fut, topic_filters = waiting
        refused = [f for f, code in zip(topic_filters, body[2:], strict=False)
                   if code == _SUBACK_FAILURE]
        if refused:
            fut.set_exception(BrokerError(
                f"the broker refused the subscription to {', '.join(refused)}"))
        elif len(body) - 2 != len(topic_filters):
            fut.set_exception(BrokerError(f"a SUBACK for {len(body) - 2} filters answered "
                                          f"a SUBSCRIBE of {len(topic_filters)}"))
        else:
            fut.set_result(None)

    def _framed(self) -> None:
        if self._ready and self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _lost(self, reason: BrokerError) -> None:
        # Dropped unacknowledged: the broker sends them again to this session.
        self._ready, self._acks = [], []
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
        for fut, _ in self._subscribing.values():
            if not fut.done():
                fut.set_exception(reason)
