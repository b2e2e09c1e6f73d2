"""MQTT topic layout: ``{topic_slug}/{device_name}/sync/{kind}``.

A project without a slug uses an empty first segment (``/{device}/sync/...``).
Tenant scope is derived from these two segments plus the device registry;
payloads never choose a device, project or fleet.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["DEVICE_TO_CLOUD", "TopicKind", "TopicRef", "parse_topic", "topic_for",
           "worker_subscriptions"]


class TopicKind(enum.StrEnum):
    ROWS_BATCH = "sync/rows/batch"
    TELEMETRY_BATCH = "sync/telemetry/batch"
    SCHEMA_OBSERVE = "sync/schema/observe"
    INGEST_ACK = "sync/ingest/ack"
    INGEST_REQUEST = "sync/ingest/request"
    INGEST_CONTROL = "sync/ingest/control"


DEVICE_TO_CLOUD: frozenset[TopicKind] = frozenset(
    k for k in TopicKind if k is not TopicKind.INGEST_CONTROL
)


@dataclass(frozen=True, slots=True)
class TopicRef:
    slug: str
    device_name: str
    kind: TopicKind

    @property
    def root(self) -> str:
        return f"{self.slug}/{self.device_name}"


def topic_for(root_topic: str, kind: TopicKind) -> str:
    """Full topic for a device's root (``slug/device`` or ``/device``)."""
    return f"{root_topic.rstrip('/')}/{kind.value}"


def parse_topic(topic: str) -> TopicRef | None:
    """Split a sync topic; ``None`` when it is not one (wrong depth, unknown kind,
    wildcard characters or an empty device segment)."""
    if "+" in topic or "#" in topic:
        return None
    parts = topic.split("/")
    if len(parts) < 5:
        return None
    slug, device, rest = parts[0], parts[1], "/".join(parts[2:])
    if not device:
        return None
    try:
        kind = TopicKind(rest)
    except ValueError:
        return None
    return TopicRef(slug=slug, device_name=device, kind=kind)


def worker_subscriptions(shared_group: str | None = None) -> list[str]:
    """Topic filters the cloud worker subscribes to (optionally as a shared subscription,
    so several ``edgesync serve`` processes split the load)."""
    filters = [f"+/+/{k.value}" for k in sorted(DEVICE_TO_CLOUD)]
    if shared_group:
        return [f"$share/{shared_group}/{f}" for f in filters]
    return filters
