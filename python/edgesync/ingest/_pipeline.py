"""The ingest pipeline as a library: hand it ``(topic, payload)``, get an outcome.

``edgesync serve`` feeds it from MQTT; any asyncio worker that consumes the same
messages from another transport (AMQP, Kafka, a test) can do the same with its
own asyncpg pool. See docs/embedding.md.
"""

from __future__ import annotations

import collections
import logging
import uuid

import asyncpg
import orjson

from edgesync.ingest._group import GroupWriter
from edgesync.ingest._outcome import IngestOutcome, OutcomeStatus
from edgesync.ingest._reports import handle_ingest_request, handle_schema_observe
from edgesync.protocol import RejectionCode, TopicKind, parse_topic
from edgesync.registry import DeviceResolver, DeviceScope

__all__ = ["IngestPipeline"]

_log = logging.getLogger(__name__)
_BATCH_KINDS = (TopicKind.ROWS_BATCH, TopicKind.TELEMETRY_BATCH)


class IngestPipeline:
    """``handle`` may be called concurrently: batch messages of concurrent calls are
    written in shared transactions (``GroupWriter``), and each call returns once its
    message's outcome has committed."""

    def __init__(self, pool: asyncpg.Pool, resolver: DeviceResolver | None = None, *,
                 writer: GroupWriter | None = None) -> None:
        self._pool = pool
        self._resolver = resolver or DeviceResolver(pool)
        self.writer = writer or GroupWriter(pool)
        self.counters: collections.Counter[str] = collections.Counter()
        # Where devices PUT presigned uploads; None leaves url_request unanswered.
        self.upload_base_url: str | None = None

    async def handle(self, topic: str, payload: bytes, *,
                     max_payload_bytes: int | None = None) -> IngestOutcome:
        """Process one message. ``max_payload_bytes`` lifts the 512 KiB MQTT limit for
        row batches cut from an uploaded object (a spilled row may be larger)."""
        ref = parse_topic(topic)
        if ref is None:
            return self._count(IngestOutcome(OutcomeStatus.REJECTED, RejectionCode.INVALID_TOPIC,
                                             f"not a device sync topic: {topic!r}"))
        scope = await self._resolver.resolve(ref.slug, ref.device_name)
        if scope is None:
            return self._count(IngestOutcome(
                OutcomeStatus.REJECTED, RejectionCode.UNKNOWN_DEVICE,
                f"no device {ref.device_name!r} in a project with topic slug {ref.slug!r}"))
        if ref.kind in _BATCH_KINDS:
            return self._count(await self.writer.submit(
                scope, ref.kind, payload, max_payload_bytes=max_payload_bytes))
        if ref.kind is TopicKind.INGEST_ACK:
            return self._count(await self._ack(scope, payload))
        if ref.kind is TopicKind.SCHEMA_OBSERVE:
            return self._count(await handle_schema_observe(self._pool, scope, payload))
        if ref.kind is TopicKind.INGEST_REQUEST:
            return self._count(await handle_ingest_request(self._pool, scope, payload,
                                                           self.upload_base_url))
        return self._count(IngestOutcome(OutcomeStatus.IGNORED, None,
                                         f"{ref.kind.value} is not handled by this server yet"))

    def _count(self, outcome: IngestOutcome) -> IngestOutcome:
        self.counters[outcome.code or outcome.status.value] += 1
        return outcome

    async def _ack(self, scope: DeviceScope, payload: bytes) -> IngestOutcome:
        try:
            control_id = uuid.UUID(str(orjson.loads(payload)["control_id"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return IngestOutcome(OutcomeStatus.REJECTED, RejectionCode.INVALID_ACK,
                                 "ack needs a control_id UUID")
        async with self._pool.acquire() as conn:
            await conn.execute(
                "UPDATE edge_pending_controls SET status = 'acked', acked_at = now() "
                "WHERE id = $1 AND device_id = $2 AND status = 'pending'",
                control_id, scope.device_id)
        return IngestOutcome(OutcomeStatus.MATERIALIZED, None, str(control_id))
