"""Device reports that carry no rows: schema observations and capture-gap reports.

Observations are advisory (a data batch still triggers classification); they warm
the registry so operators see a schema before its first batch. Gap reports record a
range of changes the device had to drop, so the loss is visible and can be repaired
by a re-seed rather than silently absent.

Every report that is refused (or not handled) gets a ledger row with its code, like a
refused batch, so nothing a known device sent leaves only a log line — a report holding
text PostgreSQL cannot store among them (``UNSTORABLE_TEXT``).
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import asyncpg
import orjson

from edgesync.control import (
    UploadStatus,
    finalize_upload,
    grant_upload,
    record_resnapshot_status,
    record_verify_digest,
)
from edgesync.errors import BatchRejected, InvalidRequestError
from edgesync.fleet import DeviceScope
from edgesync.governance import EventType, emit
from edgesync.ingest._ledger import (
    UNSTORABLE_TEXT,
    UNSTORABLE_TEXT_ERRORS,
    ledger_text,
    record_rejection,
)
from edgesync.ingest._outcome import IngestOutcome, OutcomeStatus, UploadCode
from edgesync.protocol import (
    STATUS_REQUEST_KIND,
    RejectionCode,
    StatusReport,
    TopicKind,
    parse_status,
)

__all__ = ["handle_ingest_request", "handle_schema_observe"]

_HASH = re.compile(r"^[0-9a-f]{64}$")
OnStatus = Callable[[uuid.UUID, StatusReport], None]


def _object(payload: bytes) -> dict[str, Any] | None:
    try:
        doc = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) else None


def _reject(code: RejectionCode, detail: str) -> IngestOutcome:
    return IngestOutcome(OutcomeStatus.REJECTED, code, detail)


_BAD_TABLE = "source_table must be a non-empty string of at most 255 bytes without NUL"


def _table(doc: dict[str, Any]) -> str | None:
    table = doc.get("source_table")
    if not isinstance(table, str) or "\0" in table:
        return None
    return table if 0 < len(table.encode()) <= 255 else None


async def _recorded(pool: asyncpg.Pool, scope: DeviceScope, topic_kind: str, payload: bytes,
                    handle: Callable[[], Awaitable[IngestOutcome]]) -> IngestOutcome:
    """Runs ``handle``; a refused (or unhandled) report is kept in the ledger."""
    try:
        out = await handle()
    except UNSTORABLE_TEXT_ERRORS as exc:
        out = _reject(UNSTORABLE_TEXT, f"PostgreSQL text cannot hold a string of this report "
                                       f"({type(exc).__name__}: {exc})")
    if out.status in (OutcomeStatus.REJECTED, OutcomeStatus.IGNORED) and out.code:
        async with pool.acquire() as conn:
            lineage_id = await record_rejection(conn, scope.device_id, topic_kind, payload,
                                                BatchRejected(out.code, out.detail or ""))
        out = dataclasses.replace(out, lineage_id=lineage_id)
    return out


async def handle_schema_observe(pool: asyncpg.Pool, scope: DeviceScope, payload: bytes
                                ) -> IngestOutcome:
    return await _recorded(pool, scope, TopicKind.SCHEMA_OBSERVE.value, payload,
                           lambda: _schema_observe(pool, scope, payload))


async def _schema_observe(pool: asyncpg.Pool, scope: DeviceScope, payload: bytes
                          ) -> IngestOutcome:
    doc = _object(payload)
    if doc is None:
        return _reject(RejectionCode.MALFORMED_JSON, "schema observation is not a JSON object")
    if doc.get("format_version") != 1:
        return _reject(RejectionCode.INVALID_FORMAT_VERSION,
                       "schema observation needs format_version 1")
    table, schema_hash = _table(doc), doc.get("schema_hash")
    if table is None:
        return _reject(RejectionCode.INVALID_SOURCE_TABLE, _BAD_TABLE)
    if not isinstance(schema_hash, str) or not _HASH.match(schema_hash):
        return _reject(RejectionCode.INVALID_SCHEMA_HASH,
                       "schema_hash must be 64 lowercase hex digits")
    observed = None
    if isinstance(doc.get("observed_at"), str):
        try:
            observed = datetime.fromisoformat(doc["observed_at"].replace("Z", "+00:00"))
        except ValueError:
            observed = None
    await pool.execute(
        "INSERT INTO edge_schema_observations (device_id, source_table, schema_hash, "
        "observed_at) VALUES ($1, $2, $3, $4) ON CONFLICT (device_id, source_table, "
        "schema_hash) DO UPDATE SET observed_at = EXCLUDED.observed_at, received_at = now()",
        scope.device_id, table, schema_hash, observed)
    return IngestOutcome(OutcomeStatus.MATERIALIZED, None, schema_hash)


async def handle_ingest_request(pool: asyncpg.Pool, scope: DeviceScope, payload: bytes,
                                upload_base_url: str | None = None, *,
                                on_status: OnStatus | None = None,
                                on_seen: Callable[[uuid.UUID], None] | None = None
                                ) -> IngestOutcome:
    """``on_status`` takes the agent's valid status reports (in memory: ``Presence``;
    without it they are ignored like any request kind not handled), ``on_seen`` hears of
    every other request: a message from the device (an ``offline`` report is its MQTT
    will, the broker speaking, not the device)."""
    return await _recorded(pool, scope, TopicKind.INGEST_REQUEST.value, payload,
                           lambda: _ingest_request(pool, scope, payload, upload_base_url,
                                                   on_status, on_seen))


async def _ingest_request(pool: asyncpg.Pool, scope: DeviceScope, payload: bytes,
                          upload_base_url: str | None, on_status: OnStatus | None,
                          on_seen: Callable[[uuid.UUID], None] | None) -> IngestOutcome:
    doc = _object(payload)
    kind = None if doc is None else doc.get("request_kind")
    report = parse_status(doc) if doc is not None and kind == STATUS_REQUEST_KIND else None
    if on_status is not None and isinstance(report, StatusReport):
        on_status(scope.device_id, report)
        return IngestOutcome(OutcomeStatus.MATERIALIZED, None, f"status {report.state.value}")
    if on_seen is not None:
        on_seen(scope.device_id)
    if doc is None:
        return _reject(RejectionCode.MALFORMED_JSON, "ingest request is not a JSON object")
    if on_status is not None and isinstance(report, str):
        return _reject(RejectionCode.INVALID_STATUS_REPORT, f"status report: {report}")
    if kind == "gap_report":
        return await _gap_report(pool, scope, doc)
    if kind == "url_request" and upload_base_url:
        return await _url_request(pool, scope, doc, upload_base_url)
    if kind == "finalize":
        return await _finalize(pool, scope, doc)
    if isinstance(kind, str) and kind in _RECOVERY:  # (JSON: maybe unhashable)
        return await _recovery_report(pool, scope, doc, _RECOVERY[kind])
    return IngestOutcome(OutcomeStatus.IGNORED, RejectionCode.UNSUPPORTED_REQUEST_KIND,
                         f"request_kind {kind!r} is not handled by this server")


_RECOVERY = {"resnapshot_status": record_resnapshot_status,
             "verify_digest": record_verify_digest}


async def _recovery_report(pool: asyncpg.Pool, scope: DeviceScope, doc: dict[str, Any],
                           record: Callable[[Any, uuid.UUID, str, dict[str, Any]],
                                            Awaitable[str]]) -> IngestOutcome:
    """``resnapshot_status`` / ``verify_digest`` (docs/recovery.md): the control package
    records them."""
    table = _table(doc)
    if table is None:
        return _reject(RejectionCode.INVALID_SOURCE_TABLE, _BAD_TABLE)
    try:
        async with pool.acquire() as conn, conn.transaction():
            detail = await record(conn, scope.device_id, table, doc)
    except InvalidRequestError as exc:
        return _reject(RejectionCode.INVALID_RECOVERY_REPORT, f"{exc.field}: {exc.reason}")
    return IngestOutcome(OutcomeStatus.MATERIALIZED, None, detail)


async def _gap_report(pool: asyncpg.Pool, scope: DeviceScope, doc: dict[str, Any]
                      ) -> IngestOutcome:
    table = _table(doc)
    if table is None:
        return _reject(RejectionCode.INVALID_SOURCE_TABLE, _BAD_TABLE)
    seqs = [doc.get("first_commit_seq"), doc.get("last_commit_seq")]
    if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seqs):
        return _reject(RejectionCode.INVALID_GAP_REPORT,
                       "first_commit_seq/last_commit_seq must be integers")
    try:
        epoch = uuid.UUID(str(doc["journal_epoch"])) if doc.get("journal_epoch") else None
    except ValueError:
        return _reject(RejectionCode.INVALID_JOURNAL_EPOCH, "journal_epoch is not a UUID")
    async with pool.acquire() as conn, conn.transaction():
        lineage_id = await conn.fetchval(
            "SELECT id FROM edge_table_lineages WHERE device_id = $1 AND source_table = $2",
            scope.device_id, table)
        gap_id = await conn.fetchval(
            "INSERT INTO edge_capture_gaps (device_id, lineage_id, source_table, journal_epoch, "
            "first_commit_seq, last_commit_seq, reason) VALUES ($1, $2, $3, $4, $5, $6, $7) "
            "RETURNING id", scope.device_id, lineage_id, table, epoch, seqs[0], seqs[1],
            ledger_text(str(doc.get("reason") or "local retention exceeded"), 500))
        await emit(conn, scope.project_id, EventType.CAPTURE_GAP_REPORTED, lineage_id,
                   {"gap_id": gap_id, "device_id": str(scope.device_id), "source_table": table,
                    "first_commit_seq": seqs[0], "last_commit_seq": seqs[1]})
    return IngestOutcome(OutcomeStatus.MATERIALIZED, None, f"gap {gap_id}", lineage_id)


async def _url_request(pool: asyncpg.Pool, scope: DeviceScope, doc: dict[str, Any],
                       base_url: str) -> IngestOutcome:
    table = _table(doc)
    if table is None:
        return _reject(RejectionCode.INVALID_SOURCE_TABLE, _BAD_TABLE)
    kind = doc.get("segment_kind", "bootstrap_snapshot")
    async with pool.acquire() as conn, conn.transaction():
        try:
            grant = await grant_upload(conn, device_id=scope.device_id, source_table=table,
                                       segment_kind=str(kind), base_url=base_url)
        except InvalidRequestError as exc:
            return _reject(RejectionCode.INVALID_SEGMENT_KIND, exc.reason)
    return IngestOutcome(OutcomeStatus.MATERIALIZED, None, str(grant.batch_id))


async def _finalize(pool: asyncpg.Pool, scope: DeviceScope, doc: dict[str, Any]
                    ) -> IngestOutcome:
    try:
        upload_id = uuid.UUID(str(doc.get("batch_id")))
    except ValueError:
        return _reject(RejectionCode.INVALID_BATCH_ID,
                       "finalize needs the batch_id of the url_grant")
    status = await finalize_upload(pool, upload_id, scope.device_id, _table(doc))
    if status is None:
        return _reject(RejectionCode.UNKNOWN_UPLOAD,
                       f"no upload {upload_id} for this device and table")
    if status == UploadStatus.GRANTED:
        return _reject(RejectionCode.UPLOAD_INCOMPLETE,
                       "finalize arrived before the object was uploaded")
    return IngestOutcome(OutcomeStatus.STAGED, UploadCode.UPLOAD_FINALIZED, str(upload_id))
