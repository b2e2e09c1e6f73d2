"""Accepting a group of decoded batches in one transaction: admit → materialize or
stage → settle.

Every batch message — of any device, lineage or kind — takes this path, alone or with
the others of its group (see ``_group``). In the caller's transaction:

1. the lineages of the group are locked (get-or-create, in id order);
2. telemetry ``batch_seq`` rules: a new batch_id whose batch_seq was already accepted
   (or is taken by another batch of the group) is rejected ``duplicate_batch_seq``;
   nothing else about the order of batches matters (docs/protocol.md);
3. one multi-row ledger insert claims every batch; one accepted before is a duplicate
   (its progress confirmation is queued again);
4. admission per (lineage, schema hash): approved and active lineages load their
   targets in one query, the others go through governance one at a time;
5. the batches with a target go down the one write path (``_write.write_claimed``, shared
   with replay): one COPY per target table and layout, rows set apart quarantined and
   counted on their ledger row, conflicts sent back, failures counted by the breaker;
6. the rest, and the batches that could not be written, are staged with their reason
   (one insert), backpressure checked per lineage;
7. the ledger rows of materialized batches settle with their lineages' counters.

A PostgreSQL error while writing (step 5) aborts the whole transaction: the group
writer splits the group and tries again, down to the one batch (``_write.isolate``).
That batch is then accepted with ``rows_apart`` set when the error was the data's
(``ROW_ERRORS``): its rows are written in savepoints, halved down to the rows PostgreSQL
refuses, which are quarantined. For an error of the whole target (``LINEAGE_ERRORS``) it
is accepted with ``write_error`` set (staged ``materialization_failed``, counted by the
breaker). Either way a poisoned row never rolls back or loses its neighbours, and the
ledger row commits with the effect.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field

import orjson

from edgesync._core import RowBatch, TelemetryBatch
from edgesync.control import check_backpressure
from edgesync.errors import BatchRejected
from edgesync.fleet import DeviceScope
from edgesync.governance import (
    Admission,
    Arrival,
    Lineage,
    LineageStatus,
    StagingReason,
    admit,
    admit_arrivals,
    load_state_targets,
    lock_lineages,
)
from edgesync.ingest._ledger import (
    Claim,
    SegmentKey,
    claim_many,
    record_rejection,
    redelivered_many,
    settle_many,
    taken_batch_seqs,
)
from edgesync.ingest._outcome import IngestOutcome, OutcomeStatus
from edgesync.ingest._write import Claimed, Written, write_claimed
from edgesync.protocol import Pipeline, RejectionCode, TopicKind
from edgesync.staging import StagedBatch, stage_many
from edgesync.store import CommitTail, Conn

__all__ = ["Work", "accept_group"]

_log = logging.getLogger("edgesync.ingest")


@dataclass(slots=True, eq=False)
class Work:
    """One decoded batch message on its way through a group."""

    scope: DeviceScope
    kind: TopicKind
    payload: bytes
    batch: RowBatch | TelemetryBatch
    # Set when writing this batch failed before (alone): it is staged, not written.
    write_error: str | None = None
    # Set when PostgreSQL refused this batch's data before (alone): its rows are written
    # apart (savepoints) and the refused ones quarantined.
    rows_apart: bool = False
    outcome: IngestOutcome | None = None
    lineage: Lineage | None = field(default=None, repr=False)
    # (device, batch_id): parsed once, it is looked up a dozen times on the way.
    key: SegmentKey = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.key = (self.scope.device_id, uuid.UUID(self.batch.batch_id))

    @property
    def pipeline(self) -> str:
        return Pipeline.TELEMETRY if isinstance(self.batch, TelemetryBatch) else Pipeline.ROWS


async def accept_group(conn: Conn, works: list[Work], tail: CommitTail | None = None) -> None:
    """Accept ``works`` in the caller's transaction; sets each one's ``outcome``. With
    ``tail`` (``store.committing``), the state upserts and the settle run with the
    COMMIT."""
    lineages = await lock_lineages(
        conn, [(w.scope, w.batch.source_table, w.pipeline) for w in works])
    for w in works:
        w.lineage = lineages[(w.scope.device_id, w.batch.source_table)]
    live = await _seq_rules(conn, works)
    segments = await claim_many(conn, [_claim(w) for w in live])
    claimed = []
    for w in live:
        if w.key in segments:
            claimed.append(w)
        else:  # a redelivery: accepted before (by any worker)
            w.outcome = IngestOutcome(OutcomeStatus.DUPLICATE, None, w.batch.batch_id,
                                      _lineage(w).id)
    # A redelivery writes nothing; its confirmation is queued again (the device may have
    # missed the first one, and re-sends until it has one).
    await redelivered_many(conn, [w.key for w in live if w.key not in segments])
    if not claimed:
        return
    admissions = await _admit(conn, claimed)
    staged: list[tuple[Work, StagingReason]] = []
    writes: list[tuple[Work, Claimed]] = []
    for w in claimed:
        adm = admissions[(_lineage(w).id, w.batch.schema_hash)]
        if adm.target is None:
            assert adm.staging_reason is not None
            staged.append((w, adm.staging_reason))
        else:
            writes.append((w, Claimed(w.scope.device_id, w.scope.device_name, _lineage(w),
                                      segments[w.key], w.batch, adm.target, w.rows_apart,
                                      w.write_error)))
    results = await write_claimed(conn, [c for _, c in writes], tail)
    materialized: list[tuple[Work, Written]] = []
    for (w, _), written in zip(writes, results, strict=True):
        if written.error is None:
            materialized.append((w, written))
        else:
            w.write_error = written.error
            staged.append((w, StagingReason.MATERIALIZATION_FAILED))
    grown = await stage_many(conn, [
        StagedBatch(_lineage(w).id, w.scope.device_id, segments[w.key], w.batch, w.payload,
                    reason) for w, reason in staged])
    for lineage_id in grown:
        await check_backpressure(conn, lineage_id)
    for w, reason in staged:
        w.outcome = IngestOutcome(OutcomeStatus.STAGED, reason, None, _lineage(w).id,
                                  w.batch.row_count)
    await settle_many(conn, [(_lineage(w).id, written.rows) for w, written in materialized],
                      [segments[w.key] for w, _ in staged], tail)
    for w, written in materialized:
        w.outcome = IngestOutcome(OutcomeStatus.MATERIALIZED, None, written.detail,
                                  _lineage(w).id, written.rows)


def _lineage(w: Work) -> Lineage:
    assert w.lineage is not None
    return w.lineage


def _claim(w: Work) -> Claim:
    b, lineage = w.batch, _lineage(w)
    if isinstance(b, TelemetryBatch):
        return Claim(w.scope.device_id, lineage.id, uuid.UUID(b.batch_id), w.kind.value,
                     b.source_table, b.schema_hash, b.row_count, b.payload_size,
                     batch_seq=b.batch_seq)
    return Claim(w.scope.device_id, lineage.id, uuid.UUID(b.batch_id), w.kind.value,
                 b.source_table, b.schema_hash, b.row_count, b.payload_size,
                 uuid.UUID(b.journal_epoch), b.first_commit_seq, b.last_commit_seq)


async def _seq_rules(conn: Conn, works: list[Work]) -> list[Work]:
    """Reject telemetry batches whose batch_seq another batch_id holds; the rest go on."""
    telemetry = [w for w in works if isinstance(w.batch, TelemetryBatch)]
    if not telemetry:
        return works
    taken = await taken_batch_seqs(conn, [
        (w.scope.device_id, w.batch.source_table, w.batch.batch_seq, w.key[1])
        for w in telemetry if isinstance(w.batch, TelemetryBatch)])
    holders: dict[tuple[uuid.UUID, str, int], uuid.UUID] = {}
    live = []
    for w in works:
        b = w.batch
        if not isinstance(b, TelemetryBatch):
            live.append(w)
            continue
        seq_key = (w.scope.device_id, b.source_table, b.batch_seq)
        holder = holders.setdefault(seq_key, w.key[1])
        if seq_key not in taken and holder == w.key[1]:
            live.append(w)
            continue
        rej = BatchRejected(RejectionCode.DUPLICATE_BATCH_SEQ, f"batch_seq {b.batch_seq} was "
                            "already accepted with another batch_id", "batch_seq")
        await record_rejection(conn, w.scope.device_id, w.kind.value, w.payload, rej)
        w.outcome = IngestOutcome(OutcomeStatus.REJECTED, RejectionCode(rej.code), rej.detail,
                                  _lineage(w).id)
    return live


async def _admit(conn: Conn, works: list[Work]) -> dict[tuple[uuid.UUID, str], Admission]:
    """One admission per (lineage, schema hash) of the group."""
    # One batch speaks for its (lineage, hash): one that carries the schema's columns if
    # any does (agents send them with the first batches only; shuffled, those may come
    # second in a group), so they are recorded.
    firsts: dict[tuple[uuid.UUID, str], Work] = {}
    for w in works:
        key = (_lineage(w).id, w.batch.schema_hash)
        held = firsts.get(key)
        if held is None or (held.batch.schema_columns_json is None
                            and w.batch.schema_columns_json is not None):
            firsts[key] = w
    out: dict[tuple[uuid.UUID, str], Admission] = {}
    # New lineages of a schema the registry approved: all at once.
    current: dict[uuid.UUID, Lineage] = await admit_arrivals(conn, [
        Arrival(w.scope, _lineage(w), h, w.batch.schema_columns_json)
        for (_, h), w in firsts.items() if _lineage(w).approved_schema_hash is None])
    # New hashes, other new lineages, paused lineages: governance decides, one at a time.
    for (lineage_id, schema_hash), w in firsts.items():
        lineage = current.get(lineage_id, _lineage(w))
        if lineage.approved_schema_hash == schema_hash and lineage.status == LineageStatus.ACTIVE:
            continue
        adm = await admit(conn, w.scope, lineage, schema_hash, w.batch.schema_columns_json)
        out[(lineage_id, schema_hash)] = adm
        current[lineage_id] = adm.lineage
    # The live path: approved and active; every target in one query.
    fast = [(current.get(lid, _lineage(w)), h) for (lid, h), w in firsts.items()
            if (lid, h) not in out]
    fast = [(lin, h) for lin, h in fast if lin.approved_schema_hash == h
            and lin.status == LineageStatus.ACTIVE]
    fill = {}
    for lin, h in fast:
        raw = firsts[(lin.id, h)].batch.schema_columns_json
        if raw:
            fill[lin.id] = {"table_name": lin.source_table,
                            "columns": orjson.loads(raw)["columns"]}
    targets = await load_state_targets(conn, fast, fill_schema_columns=fill)
    for lin, h in fast:
        out[(lin.id, h)] = Admission(lin, target=targets.get(lin.id))
    for (lid, h), w in firsts.items():  # paused since an earlier hash of the group
        if (lid, h) not in out:
            out[(lid, h)] = await admit(conn, w.scope, current[lid], h,
                                        w.batch.schema_columns_json)
    for w in works:
        w.lineage = out[(_lineage(w).id, w.batch.schema_hash)].lineage
    return out
