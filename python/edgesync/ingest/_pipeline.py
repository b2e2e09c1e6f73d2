"""The ingest pipeline as a library: hand it ``(topic, payload)``, get an outcome.

``edgesync serve`` feeds it from MQTT; any asyncio worker that consumes the same
messages from another transport (AMQP, Kafka, a test) can do the same with its
own asyncpg pool. See docs/embedding.md.

``handle`` is also the one seam where ingest is counted: every message is received,
then ends with its outcome (``metrics``, an ``IngestMetrics``; docs/operations.md
has the catalogue and the conservation rule the counts obey).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
import uuid

import asyncpg
import orjson

from edgesync.control import ack_control
from edgesync.fleet import DeviceResolver, DeviceScope
from edgesync.ingest._group import GroupWriter
from edgesync.ingest._outcome import IngestOutcome, OutcomeStatus
from edgesync.ingest._reports import handle_ingest_request, handle_schema_observe
from edgesync.ingest._unknown import UnknownDevices
from edgesync.observe import ABANDONED, FAILED, IngestMetrics, Presence, kind_label
from edgesync.protocol import RejectionCode, TopicKind, TopicRef, parse_topic

__all__ = ["IngestPipeline"]

_log = logging.getLogger(__name__)
_BATCH_KINDS = (TopicKind.ROWS_BATCH, TopicKind.TELEMETRY_BATCH)


class IngestPipeline:
    """``handle`` may be called concurrently: batch messages of concurrent calls are
    written in shared transactions (``GroupWriter``), and each call returns once its
    message's outcome has committed."""

    def __init__(self, pool: asyncpg.Pool, resolver: DeviceResolver | None = None, *,
                 writer: GroupWriter | None = None,
                 metrics: IngestMetrics | None = None) -> None:
        self._pool = pool
        self._resolver = resolver or DeviceResolver(pool)
        self.writer = writer or GroupWriter(pool)
        self.counters: collections.Counter[str] = collections.Counter()
        self.metrics = metrics or IngestMetrics()
        self.writer.on_group = self.metrics.group_written
        # Freshness and device presence, in memory; ``presence.run(pool)`` writes them
        # (``edgesync serve`` runs it as a background task).
        self.presence = Presence(self.metrics.registry)
        self.writer.on_committed = self.presence.group_committed
        self.writer.on_received = self._received
        self._unknown = UnknownDevices(pool)
        # Where devices PUT presigned uploads; None leaves url_request unanswered.
        self.upload_base_url: str | None = None

    async def handle(self, topic: str, payload: bytes, *,
                     max_payload_bytes: int | None = None) -> IngestOutcome:
        """Process one message. ``max_payload_bytes`` lifts the 512 KiB MQTT limit for
        row batches cut from an uploaded object (a spilled row may be larger)."""
        ref = parse_topic(topic)
        kind = kind_label(None if ref is None else ref.kind)
        self.metrics.started(kind)
        started = time.perf_counter()
        try:
            outcome = await self._dispatch(topic, ref, payload, max_payload_bytes)
        except asyncio.CancelledError:
            self.metrics.ended(kind, ABANDONED)
            raise
        except BaseException:
            self.metrics.ended(kind, FAILED)
            raise
        self.counters[outcome.code or outcome.status.value] += 1
        self.metrics.ended(kind, outcome.status.value, outcome.code, outcome.rows,
                           time.perf_counter() - started)
        return outcome

    async def _dispatch(self, topic: str, ref: TopicRef | None, payload: bytes,
                        max_payload_bytes: int | None) -> IngestOutcome:
        if ref is None:
            return IngestOutcome(OutcomeStatus.REJECTED, RejectionCode.INVALID_TOPIC,
                                 f"not a device sync topic: {topic!r}")
        scope = await self._resolver.resolve(ref.slug, ref.device_name)
        if scope is None:
            await self._unknown.dropped(topic, ref.slug, ref.device_name)
            return IngestOutcome(
                OutcomeStatus.REJECTED, RejectionCode.UNKNOWN_DEVICE,
                f"no device {ref.device_name!r} in a project with topic slug {ref.slug!r}")
        if ref.kind in _BATCH_KINDS:
            return await self.writer.submit(scope, ref.kind, payload,
                                            max_payload_bytes=max_payload_bytes)
        if ref.kind is TopicKind.INGEST_REQUEST:  # presence: see on_status / on_seen
            return await handle_ingest_request(self._pool, scope, payload, self.upload_base_url,
                                               on_status=self.presence.reported,
                                               on_seen=self._request_seen)
        self.presence.seen(scope.device_id, ref.kind)
        if ref.kind is TopicKind.INGEST_ACK:
            return await self._ack(scope, payload)
        if ref.kind is TopicKind.SCHEMA_OBSERVE:
            return await handle_schema_observe(self._pool, scope, payload)
        return IngestOutcome(OutcomeStatus.IGNORED, None,
                             f"{ref.kind.value} is not handled by this server yet")

    def _received(self, device_id: uuid.UUID, wire: int, json: int) -> None:
        self.presence.received(device_id, wire, json)
        self.metrics.batch_received(wire, json)

    def _request_seen(self, device_id: uuid.UUID) -> None:
        self.presence.seen(device_id, TopicKind.INGEST_REQUEST)

    async def _ack(self, scope: DeviceScope, payload: bytes) -> IngestOutcome:
        try:
            control_id = uuid.UUID(str(orjson.loads(payload)["control_id"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            # Acks have no ledger row (they answer controls): the drop is logged instead.
            _log.info("rejected %s from %s: %s (%d bytes)", TopicKind.INGEST_ACK.value,
                      scope.device_name, RejectionCode.INVALID_ACK, len(payload))
            return IngestOutcome(OutcomeStatus.REJECTED, RejectionCode.INVALID_ACK,
                                 "ack needs a control_id UUID")
        async with self._pool.acquire() as conn:
            await ack_control(conn, scope.device_id, control_id)
        return IngestOutcome(OutcomeStatus.MATERIALIZED, None, str(control_id))
