"""``sync/telemetry/batch``: decode, dedupe, ``batch_seq`` rules, stage or append.

Per (device, source table), under the lineage row lock:

* the same ``batch_id`` again (accepted before) → ``duplicate``, a no-op;
* a new ``batch_id`` whose ``batch_seq`` was already accepted → ``duplicate_batch_seq``;
* a new ``batch_id`` below the highest accepted ``batch_seq`` → ``stale_batch_seq``;

both rejections are recorded in the ledger like validation failures. An accepted batch
is appended to the project's ``edge_ts_*`` table (COPY) or staged while its lineage
waits for a review, and its ledger row (with ``batch_seq``) commits in the same
transaction. A redelivery is answered from the ledger before the payload is even decoded
(``peek_batch_id`` + one indexed UPDATE that also re-queues its progress confirmation),
without a transaction or the lineage lock.
"""

from __future__ import annotations

import logging
import uuid

import asyncpg

from edgesync import _core
from edgesync._core import TelemetryBatch
from edgesync.control import record_materialization_failure
from edgesync.errors import BatchRejected
from edgesync.governance import admit, lock_lineage
from edgesync.ingest._batch_steps import ingest_batch
from edgesync.ingest._ledger import record_rejection
from edgesync.ingest._outcome import IngestOutcome, OutcomeStatus
from edgesync.materialize import TsTarget
from edgesync.protocol import TopicKind
from edgesync.registry import DeviceScope
from edgesync.staging import stage_telemetry_batch
from edgesync.store import Conn

__all__ = ["ingest_telemetry"]

_log = logging.getLogger(__name__)
_KIND = TopicKind.TELEMETRY_BATCH.value

# Three index probes in one round trip: this batch_id accepted already? this batch_seq?
# the highest accepted batch_seq of the table?
_SEQ_STATE = """
SELECT
  EXISTS (SELECT 1 FROM edge_export_segments WHERE device_id = $1 AND batch_id = $4
          AND outcome <> 'rejected') AS seen,
  EXISTS (SELECT 1 FROM edge_export_segments WHERE device_id = $1 AND source_table = $2
          AND batch_seq = $3 AND outcome <> 'rejected') AS seq_taken,
  (SELECT max(batch_seq) FROM edge_export_segments WHERE device_id = $1
          AND source_table = $2 AND batch_seq IS NOT NULL AND outcome <> 'rejected') AS high
"""

# The ledger row, and for a materialized batch the lineage counter, in one round trip.
_CLAIM = """
WITH seg AS (
  INSERT INTO edge_export_segments (device_id, lineage_id, batch_id, topic_kind, source_table,
    outcome, schema_hash, batch_seq, row_count, payload_bytes)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id),
lin AS (
  UPDATE edge_table_lineages SET materialized_rows = materialized_rows + $9, updated_at = now()
  WHERE id = $2 AND $6::text = 'materialized')
SELECT id FROM seg
"""

async def ingest_telemetry(pool: asyncpg.Pool, scope: DeviceScope, payload: bytes
                           ) -> IngestOutcome:
    async with pool.acquire() as conn:
        return await ingest_batch(
            conn, scope, _KIND, payload, _core.decode_telemetry_batch,
            lambda c, batch, error: _accept(c, scope, batch, payload, error))


async def _accept(conn: Conn, scope: DeviceScope, batch: TelemetryBatch, payload: bytes,
                  write_error: str | None) -> IngestOutcome:
    batch_id = uuid.UUID(batch.batch_id)
    lineage = await lock_lineage(conn, scope, batch.source_table, "telemetry")
    state = await conn.fetchrow(_SEQ_STATE, scope.device_id, batch.source_table,
                                batch.batch_seq, batch_id)
    assert state is not None
    if state["seen"]:  # accepted by another worker since the first probe
        return IngestOutcome(OutcomeStatus.DUPLICATE, None, batch.batch_id, lineage.id)
    rej = None
    if state["seq_taken"]:
        rej = BatchRejected("duplicate_batch_seq", f"batch_seq {batch.batch_seq} was already "
                            "accepted with another batch_id", "batch_seq")
    elif state["high"] is not None and batch.batch_seq < state["high"]:
        rej = BatchRejected("stale_batch_seq", f"batch_seq {batch.batch_seq} is below the "
                            f"highest accepted batch_seq {state['high']}", "batch_seq")
    if rej is not None:
        await record_rejection(conn, scope.device_id, _KIND, payload, rej)
        return IngestOutcome(OutcomeStatus.REJECTED, rej.code, rej.detail, lineage.id)

    adm = await admit(conn, scope, lineage, batch.schema_hash, batch.schema_columns_json)
    reason = adm.staging_reason
    if adm.target is not None:
        if write_error is None:
            try:
                await TsTarget(adm.target.table, adm.target.columns, adm.target.mapped).apply(
                    conn, scope.device_id, batch)
            except BatchRejected as exc:  # a value that does not fit: raised before writing
                write_error = str(exc)
            else:
                await _claim(conn, scope, lineage.id, batch, batch_id, "materialized")
                return IngestOutcome(OutcomeStatus.MATERIALIZED, None, None, lineage.id,
                                     batch.row_count)
        await record_materialization_failure(conn, lineage.id, write_error)
        reason = "materialization_failed"
    assert reason is not None
    seg_id = await _claim(conn, scope, lineage.id, batch, batch_id, "staged")
    await stage_telemetry_batch(conn, lineage_id=lineage.id, device_id=scope.device_id,
                                segment_id=seg_id, batch=batch, payload=payload, reason=reason)
    return IngestOutcome(OutcomeStatus.STAGED, reason, None, lineage.id, batch.row_count)


async def _claim(conn: Conn, scope: DeviceScope, lineage_id: uuid.UUID,
                 batch: TelemetryBatch, batch_id: uuid.UUID, outcome: str) -> int:
    seg_id: int = await conn.fetchval(
        _CLAIM, scope.device_id, lineage_id, batch_id, _KIND, batch.source_table, outcome,
        batch.schema_hash, batch.batch_seq, batch.row_count, batch.payload_size)
    return seg_id
