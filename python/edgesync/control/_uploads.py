"""Presigned uploads: ``url_request`` → ``url_grant`` → HTTP PUT → ``finalize``.

The grant is a control like any other (outbox, ACK, signature). The URL carries an
HMAC over (upload id, expiry) with a server secret kept in the database, so any
worker can check it and nothing else can forge one; it expires after 15 minutes.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import os
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeAlias

import asyncpg

from edgesync.control._outbox import enqueue_control
from edgesync.errors import InvalidRequestError, NotFoundError
from edgesync.protocol import ControlKind, uuid7
from edgesync.store import Conn, from_record

# The upload statements run on a connection or straight on the pool.
_Db: TypeAlias = "Conn | asyncpg.Pool[asyncpg.Record]"

__all__ = ["GRANT_TTL", "UPLOAD_PATH", "Upload", "UploadGrant", "UploadStatus", "finalize_upload",
           "grant_upload", "note_ingested", "note_uploaded", "upload_secret", "verify_upload_url"]

GRANT_TTL = timedelta(minutes=15)
UPLOAD_PATH = "/core/api/v1/edge/uploads"
SEGMENT_KINDS = ("bootstrap_snapshot", "payload_spill")


class UploadStatus(enum.StrEnum):
    """A device upload in the cloud (``edge_uploads.status``)."""

    GRANTED = "granted"  # a presigned URL is out; the object has not arrived
    UPLOADED = "uploaded"  # the object is stored
    INGESTED = "ingested"  # its rows went through ingest
    FAILED = "failed"  # ingest could not take it (last_error says why)


@dataclass(frozen=True, slots=True)
class UploadGrant:
    """An upload slot granted and the ``url_grant`` control that carries its URL."""

    control_id: uuid.UUID
    batch_id: uuid.UUID  # the upload's id, finalized by the device as its batch
    source_table: str
    segment_kind: str
    presigned_url: str
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class Upload:
    """An upload slot as stored (a row of ``edge_uploads``)."""

    id: uuid.UUID
    device_id: uuid.UUID
    source_table: str
    segment_kind: str
    status: UploadStatus
    expires_at: datetime
    byte_count: int | None
    rows_ingested: int
    last_error: str | None
    finalized_at: datetime | None
    created_at: datetime
    updated_at: datetime


async def upload_secret(conn: Conn) -> bytes:
    await conn.execute(
        "INSERT INTO edge_server_secrets (name, value) VALUES ('upload_url', $1) "
        "ON CONFLICT (name) DO NOTHING", os.urandom(32))
    value = await conn.fetchval("SELECT value FROM edge_server_secrets WHERE name = 'upload_url'")
    return bytes(value)


def _signature(secret: bytes, upload_id: uuid.UUID, expires: int) -> str:
    return hmac.new(secret, f"{upload_id}:{expires}".encode(), hashlib.sha256).hexdigest()


async def grant_upload(conn: Conn, *, device_id: uuid.UUID, source_table: str,
                       segment_kind: str, base_url: str) -> UploadGrant:
    """Record an upload slot and queue its ``url_grant`` control (caller's transaction)."""
    if segment_kind not in SEGMENT_KINDS:
        raise InvalidRequestError("segment_kind", f"must be one of {', '.join(SEGMENT_KINDS)}")
    upload_id = uuid.UUID(uuid7())
    expires_at = datetime.now(UTC) + GRANT_TTL
    expires = int(expires_at.timestamp())
    await conn.execute(
        "INSERT INTO edge_uploads (id, device_id, source_table, segment_kind, expires_at) "
        "VALUES ($1, $2, $3, $4, $5)", upload_id, device_id, source_table, segment_kind,
        expires_at)
    sig = _signature(await upload_secret(conn), upload_id, expires)
    url = f"{base_url.rstrip('/')}{UPLOAD_PATH}/{upload_id}?expires={expires}&signature={sig}"
    body = {"source_table": source_table, "batch_id": str(upload_id),
            "segment_kind": segment_kind, "presigned_url": url,
            "presigned_url_expires_at": expires_at.strftime("%Y-%m-%dT%H:%M:%SZ")}
    control_id = await enqueue_control(conn, device_id=device_id, lineage_id=None,
                                       kind=ControlKind.URL_GRANT, body=body)
    return UploadGrant(control_id, upload_id, source_table, segment_kind, url, expires_at)


async def verify_upload_url(conn: Conn, upload_id: uuid.UUID, expires: int,
                            signature: str) -> Upload:
    """The upload a presigned URL names, if its signature holds and it has not expired."""
    good = _signature(await upload_secret(conn), upload_id, expires)
    if not hmac.compare_digest(good, signature):
        raise NotFoundError("no such upload")  # a forged URL learns nothing
    if time.time() >= expires:
        raise InvalidRequestError("expires", "the presigned URL has expired; request a new one")
    row = await conn.fetchrow("SELECT * FROM edge_uploads WHERE id = $1", upload_id)
    if row is None:
        raise NotFoundError("no such upload")
    return from_record(Upload, row, status=UploadStatus(row["status"]))


async def note_uploaded(db: _Db, upload_id: uuid.UUID, size: int) -> None:
    """The object of a granted upload arrived (``PUT`` of its presigned URL)."""
    await db.execute(
        "UPDATE edge_uploads SET status = 'uploaded', byte_count = $2, updated_at = now() "
        "WHERE id = $1 AND status = 'granted'", upload_id, size)


async def finalize_upload(db: _Db, upload_id: uuid.UUID, device_id: uuid.UUID,
                          source_table: str | None) -> str | None:
    """The device's ``finalize``: the upload's status, or None when it has no such upload.
    An upload whose object has not arrived yet (``granted``) stays unfinalized."""
    row = await db.fetchrow(
        "UPDATE edge_uploads SET finalized_at = coalesce(finalized_at, now()), "
        "updated_at = now() WHERE id = $1 AND device_id = $2 AND source_table = $3 "
        "RETURNING status", upload_id, device_id, source_table)
    if row is None:
        return None
    if row["status"] == UploadStatus.GRANTED:
        await db.execute("UPDATE edge_uploads SET finalized_at = NULL WHERE id = $1",
                         upload_id)
    return str(row["status"])


async def note_ingested(db: _Db, upload_id: uuid.UUID, rows: int, error: str | None) -> None:
    """An uploaded object went through ingest (``failed`` with ``error``)."""
    await db.execute(
        "UPDATE edge_uploads SET status = $2, rows_ingested = $3, last_error = $4, "
        "updated_at = now() WHERE id = $1",
        upload_id, UploadStatus.FAILED if error else UploadStatus.INGESTED, rows, error)
