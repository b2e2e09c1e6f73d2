"""MQTT 3.1.1 packets as the worker's hand-written clients write them.

Only what ``PublishingClient`` and ``ConsumingClient`` send: CONNECT, PUBLISH at QoS 1,
SUBSCRIBE, and the fixed packets (PINGREQ, DISCONNECT); a PUBACK is four bytes the
consumer packs itself. What the broker answers is read by ``MqttConnection``.
"""

from __future__ import annotations

from collections.abc import Sequence

from edgesync.errors import BrokerError

__all__ = ["CONNACK_REFUSALS", "DISCONNECT", "PINGREQ", "connect_packet", "publish_packet",
           "subscribe_packet"]

PINGREQ = b"\xc0\x00"
DISCONNECT = b"\xe0\x00"
# CONNACK return codes other than 0 (accepted), as MQTT 3.1.1 names them.
CONNACK_REFUSALS = {1: "unacceptable protocol version", 2: "client identifier rejected",
                    3: "server unavailable", 4: "bad user name or password",
                    5: "not authorized"}
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


def connect_packet(client_id: str, *, clean_session: bool, keepalive: int,
                   username: str | None, password: str | None) -> bytes:
    """CONNECT, MQTT 3.1.1 (no will)."""
    flags = 0x02 if clean_session else 0
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


def subscribe_packet(packet_id: int, topic_filters: Sequence[str], *, qos: int) -> bytes:
    """SUBSCRIBE to every filter at ``qos``, in one packet (one SUBACK answers it)."""
    body = packet_id.to_bytes(2, "big") + b"".join(
        _string(f) + bytes([qos]) for f in topic_filters)
    return b"\x82" + _remaining_length(len(body)) + body
