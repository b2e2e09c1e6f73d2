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
from edgesync.ingest._ledger import (
    claim_batch,
    record_rejection,
    redelivered,
    settle_batch,
)
from edgesync.ingest._outcome import IngestOutcome, OutcomeStatus
from edgesync.ingest._reports import handle_ingest_request, handle_schema_observe
from edgesync.ingest._telemetry import ingest_telemetry
from edgesync.materialize import StateTarget
from edgesync.protocol import TopicKind, parse_topic
from edgesync.registry import DeviceResolver, DeviceScope
from edgesync.staging import stage_row_batch
from edgesync.store import Conn

__all__ = ["IngestPipeline"]

_log = logging.getLogger(__name__)


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
        kind = TopicKind.ROWS_BATCH.value
        redelivered = await self._redelivered(scope, payload)
        if redelivered is not None:
            return IngestOutcome(OutcomeStatus.DUPLICATE, None, redelivered)
        try:
            batch = _core.decode_row_batch(payload, max_payload_bytes)
        except BatchRejected as rej:
            async with self._pool.acquire() as conn:
                lineage_id = await record_rejection(conn, scope.device_id, kind, payload, rej)
            _log.info("rejected batch from %s: %s", scope.device_name, rej)
            return IngestOutcome(OutcomeStatus.REJECTED, rej.code, rej.detail, lineage_id)
        async with self._pool.acquire() as conn, conn.transaction():
            seg_id = await claim_batch(conn, scope.device_id, kind, batch)
            if seg_id is None:
                return IngestOutcome(OutcomeStatus.DUPLICATE, None, batch.batch_id)
            lineage = await lock_lineage(conn, scope, batch.source_table, "rows")
            adm = await admit(conn, scope, lineage, batch.schema_hash, batch.schema_columns_json)
            reason = adm.staging_reason
            if adm.target is not None:
                failure = await self._materialize(conn, scope, lineage.id, adm.target, batch)
                if failure is None:
                    await settle_batch(conn, seg_id, lineage.id, "materialized")
                    return IngestOutcome(OutcomeStatus.MATERIALIZED, None, None, lineage.id,
                                         batch.row_count)
                reason = "materialization_failed"
            assert reason is not None
            await stage_row_batch(conn, lineage_id=lineage.id, device_id=scope.device_id,
                                  segment_id=seg_id, batch=batch, payload=payload, reason=reason)
            await settle_batch(conn, seg_id, lineage.id, "staged")
            return IngestOutcome(OutcomeStatus.STAGED, reason, None, lineage.id, batch.row_count)

    async def _redelivered(self, scope: DeviceScope, payload: bytes) -> str | None:
        """The batch_id of a redelivered, already accepted batch (answered from the ledger
        before decoding), else None."""
        return await redelivered(self._pool, scope.device_id, payload)

    async def _materialize(self, conn: Conn, scope: DeviceScope,
                           lineage_id: uuid.UUID, target: StateTarget, batch: RowBatch
                           ) -> str | None:
        """Write the batch; on a permanent error roll back to a savepoint and report it
        (the caller stages the batch, so nothing is lost)."""
        try:
            async with conn.transaction():
                await target.apply(conn, scope.device_id, batch)
        except (BatchRejected, asyncpg.DataError, asyncpg.IntegrityConstraintViolationError,
                asyncpg.UndefinedColumnError, asyncpg.UndefinedTableError) as exc:
            await record_materialization_failure(conn, lineage_id, str(exc))
            _log.warning("materialization of batch %s failed: %s", batch.batch_id, exc)
            return str(exc)
        if target.conflicts:
            await resend_cloud_rows(conn, lineage_id, scope.device_id, target.conflicts)
        await conn.execute(
            "UPDATE edge_table_lineages SET materialized_rows = materialized_rows + $2, "
            "updated_at = now() WHERE id = $1", lineage_id, batch.row_count)
        return None

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
