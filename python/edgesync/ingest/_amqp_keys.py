"""AMQP routing keys of device messages, and the MQTT topics they came from.

RabbitMQ's MQTT plugin publishes every MQTT message into ``amq.topic`` with the topic as
routing key, each ``/`` replaced by ``.`` and nothing else changed (checked on 3.10;
``rabbit_mqtt_util:to_amqp`` does the same in later releases). A ``.`` inside a topic
slug or device name (both may hold one) therefore becomes a level separator as well:
``plant.a/gw.1/sync/rows/batch`` arrives as ``plant.a.gw.1.sync.rows.batch``, which
``plant/a.gw.1``, ``plant.a.gw/1``, ... would also have produced. The ``sync/...`` tail
never holds a dot, so only the split between slug and device is in doubt:
``topic_candidates`` lists every split, and ``TopicResolver`` picks the one the registry
knows, asking it only when there is more than one.
"""

from __future__ import annotations

import logging

from edgesync.fleet import DeviceResolver
from edgesync.protocol import DEVICE_TO_CLOUD, TopicKind, parse_topic

__all__ = ["TopicResolver", "amqp_binding_keys", "routing_key_of", "topic_candidates"]

_log = logging.getLogger(__name__)

# "sync.rows.batch" → ROWS_BATCH, for the kinds devices send.
_KINDS: dict[str, TopicKind] = {k.value.replace("/", "."): k for k in DEVICE_TO_CLOUD}


def routing_key_of(topic: str) -> str:
    """The routing key RabbitMQ's MQTT plugin gives a message published on ``topic``."""
    return topic.replace("/", ".")


def amqp_binding_keys() -> list[str]:
    """Binding keys of the ingest queue on ``amq.topic``: one per device-to-cloud kind.
    ``#`` and not ``*.*`` (the MQTT ``+/+`` of ``worker_subscriptions``): a dot in a
    slug or device name adds words to the key."""
    return [f"#.{key}" for key in sorted(_KINDS)]


def topic_candidates(routing_key: str) -> list[str]:
    """Every sync topic that RabbitMQ's MQTT plugin turns into ``routing_key``, in order
    of the split point (the first has the shortest slug); empty when the key is no sync
    topic at all."""
    for tail in _KINDS:
        head, sep, rest = routing_key.rpartition("." + tail)
        if sep and not rest:
            break
    else:
        return []
    kind = _KINDS[tail].value
    out = []
    for i, char in enumerate(head):
        if char == ".":
            topic = f"{head[:i]}/{head[i + 1:]}/{kind}"
            if parse_topic(topic) is not None:
                out.append(topic)
    return out


class TopicResolver:
    """Routing key → the MQTT topic its device published on."""

    def __init__(self, devices: DeviceResolver) -> None:
        self._devices = devices

    async def topic(self, routing_key: str) -> str | None:
        """The topic; ``None`` when the key is no sync topic or names two registered
        devices (logged: one of them must be renamed to ingest over AMQP). A key whose
        device is not registered maps to its first candidate, which the pipeline rejects
        as ``unknown_device``."""
        candidates = topic_candidates(routing_key)
        if len(candidates) <= 1:
            return candidates[0] if candidates else None
        known = []
        for topic in candidates:
            ref = parse_topic(topic)
            assert ref is not None
            if await self._devices.resolve(ref.slug, ref.device_name) is not None:
                known.append(topic)
        if len(known) == 1:
            return known[0]
        if not known:
            return candidates[0]
        _log.error("routing key %r fits registered devices on %s: RabbitMQ's MQTT plugin "
                   "turns '/' into '.', so their messages cannot be told apart; rename one "
                   "(dropped)", routing_key, " and ".join(known))
        return None
