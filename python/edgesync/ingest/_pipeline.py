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

from edgesync import _core
from edgesync._core import RowBatch
from edgesync.control import record_materialization_failure, resend_cloud_rows
from edgesync.errors import BatchRejected
from edgesync.governance import admit, lock_lineage
from edgesync.ingest._batch_steps import ingest_batch
from edgesync.ingest._ledger import (
    claim_batch,
    settle_batch,
)
from edgesync.ingest._outcome import IngestOutcome, OutcomeStatus
from edgesync.ingest._reports import handle_ingest_request, handle_schema_observe
from edgesync.ingest._telemetry import ingest_telemetry
from edgesync.protocol import TopicKind, parse_topic
from edgesync.registry import DeviceResolver, DeviceScope
from edgesync.staging import stage_row_batch
from edgesync.store import Conn

__all__ = ["IngestPipeline"]

_log = logging.getLogger(__name__)
_KIND = TopicKind.ROWS_BATCH.value

# The ledger row settles and the lineage counts the rows, in one round trip.
_SETTLE_MATERIALIZED = """
WITH seg AS (
  UPDATE edge_export_segments SET outcome = 'materialized', lineage_id = $2 WHERE id = $1)
UPDATE edge_table_lineages SET materialized_rows = materialized_rows + $3, updated_at = now()
WHERE id = $2
"""


class IngestPipeline:
    def __init__(self, pool: asyncpg.Pool, resolver: DeviceResolver | None = None) -> None:
        self._pool = pool
        self._resolver = resolver or DeviceResolver(pool)
        self.counters: collections.Counter[str] = collections.Counter()
        # Where devices PUT presigned uploads; None leaves url_request unanswered.
        self.upload_base_url: str | None = None

    async def handle(self, topic: str, payload: bytes, *,
                     max_payload_bytes: int | None = None) -> IngestOutcome:
        """Process one message. ``max_payload_bytes`` lifts the 512 KiB MQTT limit for
        row batches cut from an uploaded object (a spilled row may be larger)."""
        ref = parse_topic(topic)
        if ref is None:
            return self._count(IngestOutcome(OutcomeStatus.REJECTED, "invalid_topic",
                                             f"not a device sync topic: {topic!r}"))
        scope = await self._resolver.resolve(ref.slug, ref.device_name)
        if scope is None:
            return self._count(IngestOutcome(
                OutcomeStatus.REJECTED, "unknown_device",
                f"no device {ref.device_name!r} in a project with topic slug {ref.slug!r}"))
        if ref.kind is TopicKind.ROWS_BATCH:
            return self._count(await self._rows_batch(scope, payload, max_payload_bytes))
        if ref.kind is TopicKind.TELEMETRY_BATCH:
            return self._count(await ingest_telemetry(self._pool, scope, payload))
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

    async def _rows_batch(self, scope: DeviceScope, payload: bytes,
                          max_payload_bytes: int | None = None) -> IngestOutcome:
        async with self._pool.acquire() as conn:
            return await ingest_batch(
                conn, scope, _KIND, payload,
                lambda p: _core.decode_row_batch(p, max_payload_bytes),
                lambda c, batch, error: self._accept_rows(c, scope, batch, payload, error))

    async def _accept_rows(self, conn: Conn, scope: DeviceScope, batch: RowBatch,
                           payload: bytes, write_error: str | None) -> IngestOutcome:
        seg_id = await claim_batch(conn, scope.device_id, _KIND, batch)
        if seg_id is None:
            return IngestOutcome(OutcomeStatus.DUPLICATE, None, batch.batch_id)
        lineage = await lock_lineage(conn, scope, batch.source_table, "rows")
        adm = await admit(conn, scope, lineage, batch.schema_hash, batch.schema_columns_json)
        reason = adm.staging_reason
        if adm.target is not None:
            if write_error is None:
                try:
                    await adm.target.apply(conn, scope.device_id, batch, alone=True)
                except BatchRejected as exc:  # a value that does not fit: before any write
                    write_error = str(exc)
                else:
                    if adm.target.conflicts:
                        await resend_cloud_rows(conn, lineage.id, scope.device_id,
                                                adm.target.conflicts)
                    await conn.execute(_SETTLE_MATERIALIZED, seg_id, lineage.id,
                                       batch.row_count)
                    return IngestOutcome(OutcomeStatus.MATERIALIZED, None, None, lineage.id,
                                         batch.row_count)
            await record_materialization_failure(conn, lineage.id, write_error)
            _log.warning("batch %s staged: %s", batch.batch_id, write_error)
            reason = "materialization_failed"
        assert reason is not None
        await stage_row_batch(conn, lineage_id=lineage.id, device_id=scope.device_id,
                              segment_id=seg_id, batch=batch, payload=payload, reason=reason)
        await settle_batch(conn, seg_id, lineage.id, "staged")
        return IngestOutcome(OutcomeStatus.STAGED, reason, None, lineage.id, batch.row_count)

    async def _ack(self, scope: DeviceScope, payload: bytes) -> IngestOutcome:
        try:
            control_id = uuid.UUID(str(orjson.loads(payload)["control_id"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return IngestOutcome(OutcomeStatus.REJECTED, "invalid_ack",
                                 "ack needs a control_id UUID")
        async with self._pool.acquire() as conn:
            await conn.execute(
                "UPDATE edge_pending_controls SET status = 'acked', acked_at = now() "
                "WHERE id = $1 AND device_id = $2 AND status = 'pending'",
                control_id, scope.device_id)
        return IngestOutcome(OutcomeStatus.MATERIALIZED, None, str(control_id))
