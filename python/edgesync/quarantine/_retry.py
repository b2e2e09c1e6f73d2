"""Retrying quarantined rows: as they are, or with values an operator replaced.

A retry builds a one-row batch payload from the stored row JSON (the device's own
value text, or the operator's edit) and decodes it with the same Rust decoder as live
ingest, then writes it with ``materialize.write_batches`` to the lineage's target for
the row's schema version, in a savepoint: a row refused again stays open with the new
reason, and nothing else of the operator's transaction is lost. State writes are
newer-wins as always, so retrying a row a newer change overtook changes nothing (the
sweep marks such rows superseded first).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from edgesync import _core
from edgesync._core import RowBatch, TelemetryBatch
from edgesync.control import resend_cloud_rows
from edgesync.errors import BatchRejected, ConflictError, InvalidRequestError, NotFoundError
from edgesync.governance import (
    EventType,
    Lineage,
    count_materialized,
    emit,
    load_state_target,
)
from edgesync.materialize import WriteItem, write_batches
from edgesync.protocol import Pipeline, RejectionCode
from edgesync.quarantine._rows import (
    QuarantinedRow,
    QuarantineStatus,
    get_row,
    mark_attempt,
    mark_retried,
    open_rows,
    sweep,
)
from edgesync.store import Conn

__all__ = ["RetryOutcome", "RetryTotals", "retry_all", "retry_row"]

_log = logging.getLogger(__name__)
_CHUNK = 200


@dataclass(slots=True)
class RetryOutcome:
    id: int
    status: QuarantineStatus
    written: bool
    reason_code: str | None = None
    reason: str | None = None


@dataclass(slots=True)
class RetryTotals:
    retried: int = 0
    failed: int = 0
    superseded: int = 0
    failures: list[RetryOutcome] = field(default_factory=list)


def _edited(row: QuarantinedRow, values: dict[str, Any] | None) -> str:
    """The row JSON to write: the stored one, or with ``values`` replacing those keys of
    its ``row`` (state) or ``fields`` (telemetry) object."""
    if values is None:
        return row.row_json
    doc = json.loads(row.row_json)  # stdlib: integers of any size stay exact
    part = "fields" if row.pipeline == Pipeline.TELEMETRY else "row"
    if doc.get(part) is None:
        raise InvalidRequestError("values", "a quarantined delete has no values to edit; "
                                  "retry it as it is or discard it")
    for key, value in values.items():
        if part == "row" and key in doc["pk"]:
            raise InvalidRequestError(f"values.{key}", "a primary-key column cannot be "
                                      "edited: a quarantined row keeps its key")
        doc[part][key] = value  # the decoder and the encoder judge the value
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _one_row_batch(row: QuarantinedRow, row_json: str) -> RowBatch | TelemetryBatch:
    """A payload of the one row, decoded as live ingest decodes."""
    if row.pipeline == Pipeline.TELEMETRY:
        ts = json.loads(row_json)["ts"]
        head = {"format_version": 1, "capture_strategy": "sqlite_telemetry_batch_v1",
                "batch_id": str(row.batch_id), "batch_seq": row.batch_seq,
                "source_table": row.source_table, "schema_hash": row.schema_hash,
                "cursor_start_ts": ts, "cursor_end_ts": ts, "row_count": 1}
    else:
        head = {"format_version": 1, "capture_strategy": "sqlite_row_batch_v1",
                "batch_id": str(row.batch_id), "journal_epoch": str(row.journal_epoch),
                "source_table": row.source_table, "schema_hash": row.schema_hash,
                "first_commit_seq": row.commit_seq, "last_commit_seq": row.commit_seq,
                "row_count": 1}
    envelope = json.dumps(head, ensure_ascii=False, separators=(",", ":"))
    payload = f'{envelope[:-1]},"rows":[{row_json}]}}'.encode()
    try:
        if row.pipeline == Pipeline.TELEMETRY:
            return _core.decode_telemetry_batch(payload)
        batch = _core.decode_row_batch(payload, 1 << 30)
    except BatchRejected as exc:
        raise InvalidRequestError(exc.field or "values", f"{exc.code}: {exc.detail}") from exc
    if batch.row_at(0)[2] != row.pk_hash:  # only the stored key spelling can differ
        raise InvalidRequestError("values", "the row's primary key no longer hashes as "
                                  "when it was quarantined")
    return batch


async def retry_row(conn: Conn, lineage: Lineage, row_id: int, *, actor: str,
                    values: dict[str, Any] | None = None) -> RetryOutcome:
    """Write quarantined row ``row_id`` (with ``values`` replaced, when given) through the
    writer, in the caller's transaction."""
    await sweep(conn, lineage.id,
                lineage.target_table if lineage.pipeline == Pipeline.ROWS else None)
    row = await get_row(conn, lineage.id, row_id, for_update=True)
    if row is None:
        raise NotFoundError(f"quarantined row {row_id} not found in lineage {lineage.id}")
    if row.status is not QuarantineStatus.OPEN:
        raise ConflictError(f"quarantined row {row_id} is {row.status}: only open rows are "
                            "retried")
    outcome = await _write(conn, lineage, row, _edited(row, values), actor=actor,
                           edited=values is not None)
    await emit(conn, lineage.project_id, EventType.QUARANTINED_ROW_RETRIED, lineage.id,
               {"lineage_id": str(lineage.id), "quarantined_row_id": row_id, "actor": actor,
                "edited": values is not None, "written": outcome.written,
                "reason_code": outcome.reason_code})
    return outcome


async def retry_all(conn: Conn, lineage: Lineage, *, actor: str) -> RetryTotals:
    """Retry every open quarantined row of the lineage as it is, oldest first."""
    totals = RetryTotals()
    totals.superseded = await sweep(
        conn, lineage.id, lineage.target_table if lineage.pipeline == Pipeline.ROWS else None)
    after = 0
    while rows := await open_rows(conn, lineage.id, after=after, limit=_CHUNK):
        for row in rows:
            after = row.id
            try:
                outcome = await _write(conn, lineage, row, row.row_json, actor=actor,
                                       edited=False)
            except InvalidRequestError as exc:  # stored before a decoder change
                outcome = RetryOutcome(row.id, row.status, False,
                                       RejectionCode.INVALID_ROW, str(exc))
            if outcome.written:
                totals.retried += 1
            else:
                totals.failed += 1
                if len(totals.failures) < 20:
                    totals.failures.append(outcome)
    await emit(conn, lineage.project_id, EventType.QUARANTINED_ROWS_RETRIED, lineage.id,
               {"lineage_id": str(lineage.id), "actor": actor, "retried": totals.retried,
                "failed": totals.failed, "superseded": totals.superseded})
    return totals


async def _bound_to(conn: Conn, lineage: Lineage, schema_hash: str) -> str | None:
    """The approved version whose bindings write rows of ``schema_hash``: itself, or for a
    rejected version the one an operator found it compatible with; None when neither."""
    bound: str | None = await conn.fetchval(
        "SELECT b.schema_hash FROM edge_schema_versions v JOIN edge_schema_versions b "
        "ON b.lineage_id = v.lineage_id AND b.status = 'approved' AND b.schema_hash = "
        "  CASE WHEN v.status = 'rejected' THEN v.replay_as_schema_hash ELSE v.schema_hash END "
        "WHERE v.lineage_id = $1 AND v.schema_hash = $2", lineage.id, schema_hash)
    return bound


async def _write(conn: Conn, lineage: Lineage, row: QuarantinedRow, row_json: str, *,
                 actor: str, edited: bool) -> RetryOutcome:
    batch = _one_row_batch(row, row_json)
    bound = await _bound_to(conn, lineage, row.schema_hash)
    if bound is None:
        raise ConflictError(f"the row's schema version {row.schema_hash[:12]}… is not "
                            "approved (any more): approve it, or discard the row")
    target = await load_state_target(conn, lineage, bound)
    if target is None:
        raise ConflictError(f"lineage {lineage.id} has no target table")
    item = WriteItem(lineage.device_id, batch, target)
    code: str | None = None
    reason: str | None = None
    field_: str | None = None
    try:
        async with conn.transaction():  # a savepoint: a refused row leaves no trace
            await write_batches(conn, [item])
    except asyncpg.PostgresError as exc:
        code = str(exc.sqlstate or type(exc).__name__)
        reason = f"{type(exc).__name__}: {exc}"
        field_ = getattr(exc, "column_name", None) or None
    if code is None and item.refused:
        code, reason, field_ = (item.refused[0].code, item.refused[0].message,
                                item.refused[0].field)
    if code is None and item.error is not None:
        code, reason = RejectionCode.VALUE_TYPE_MISMATCH, item.error
    if code is not None:
        assert reason is not None
        await mark_attempt(conn, row.id, actor=actor, row_json=row_json, edited=edited,
                           code=code, reason=reason, field=field_)
        _log.info("retry of quarantined row %s failed: %s", row.id, reason)
        return RetryOutcome(row.id, QuarantineStatus.OPEN, False, code, reason)
    if item.conflicts:
        await resend_cloud_rows(conn, lineage.id, lineage.device_id, item.conflicts)
    await mark_retried(conn, row.id, actor=actor, row_json=row_json, edited=edited)
    await count_materialized(conn, lineage.id, 1)
    return RetryOutcome(row.id, QuarantineStatus.RETRIED, True)
