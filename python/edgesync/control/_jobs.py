"""Re-snapshots and verifications as stored (``edge_resnapshots``,
``edge_verifications``): their statuses, their types and their reads. The jobs are
written by ``control._resnapshot`` and ``control._verify``; the lineage's detail, its
recovery lists and the offers read them here."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, overload

import asyncpg

from edgesync.errors import NotFoundError
from edgesync.store import Conn, from_record

__all__ = ["JobKind", "Resnapshot", "ResnapshotStatus", "Verification", "VerificationStatus",
           "recovery_job", "recovery_jobs"]


class ResnapshotStatus(enum.StrEnum):
    REQUESTED = "requested"  # the control is queued (or on its way)
    RUNNING = "running"  # the device reports chunks sent
    COMPLETED = "completed"  # every chunk committed by the cloud
    FAILED = "failed"  # the device could not run it (error says why)


class VerificationStatus(enum.StrEnum):
    REQUESTED = "requested"
    EQUAL = "equal"
    DIFFERENT = "different"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Resnapshot:
    """One re-snapshot job (a row of ``edge_resnapshots``)."""

    id: uuid.UUID
    project_id: uuid.UUID
    lineage_id: uuid.UUID
    device_id: uuid.UUID
    # The scope as the control carried it (``SnapshotFilter.doc``): JSON the device reads.
    filter: dict[str, Any]
    verification_id: uuid.UUID | None
    status: ResnapshotStatus
    rows_sent: int
    chunks: int
    journal_epoch: uuid.UUID | None
    first_commit_seq: int | None
    last_commit_seq: int | None
    swept_rows: int | None
    error: str | None
    requested_by: str | None
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None

    @classmethod
    def from_record(cls, rec: asyncpg.Record) -> Resnapshot:
        return from_record(cls, rec, status=ResnapshotStatus(rec["status"]))


@dataclass(frozen=True, slots=True)
class Verification:
    """One verification job (a row of ``edge_verifications``)."""

    id: uuid.UUID
    project_id: uuid.UUID
    lineage_id: uuid.UUID
    device_id: uuid.UUID
    prefix: int
    # The columns as the ``verify_table`` control named them (``{"name", "text"?}``):
    # the wire's JSON, stored as sent.
    columns: list[dict[str, Any]]
    skipped_columns: list[str]
    repair: bool
    status: VerificationStatus
    device_rows: int | None
    cloud_rows: int | None
    differing_buckets: list[str] | None
    changed_buckets: list[str] | None
    resnapshot_id: uuid.UUID | None
    error: str | None
    requested_by: str | None
    created_at: datetime
    completed_at: datetime | None

    @classmethod
    def from_record(cls, rec: asyncpg.Record) -> Verification:
        return from_record(cls, rec, status=VerificationStatus(rec["status"]))


JobKind = Literal["resnapshot", "verification"]
_JOBS: dict[str, tuple[str, type[Resnapshot] | type[Verification]]] = {
    "resnapshot": ("edge_resnapshots", Resnapshot),
    "verification": ("edge_verifications", Verification),
}


@overload
async def recovery_job(conn: Conn, kind: Literal["resnapshot"], job_id: uuid.UUID
                       ) -> Resnapshot: ...
@overload
async def recovery_job(conn: Conn, kind: Literal["verification"], job_id: uuid.UUID
                       ) -> Verification: ...
async def recovery_job(conn: Conn, kind: JobKind, job_id: uuid.UUID
                       ) -> Resnapshot | Verification:
    """One re-snapshot or verification, as stored."""
    table, cls = _JOBS[kind]
    row = await conn.fetchrow(f"SELECT * FROM {table} WHERE id = $1", job_id)
    if row is None:
        raise NotFoundError(f"no {kind} {job_id}")
    return cls.from_record(row)


@overload
async def recovery_jobs(conn: Conn, kind: Literal["resnapshot"], lineage_id: uuid.UUID, *,
                        offset: int, limit: int) -> tuple[list[Resnapshot], int]: ...
@overload
async def recovery_jobs(conn: Conn, kind: Literal["verification"], lineage_id: uuid.UUID, *,
                        offset: int, limit: int) -> tuple[list[Verification], int]: ...
async def recovery_jobs(conn: Conn, kind: JobKind, lineage_id: uuid.UUID, *, offset: int,
                        limit: int) -> tuple[list[Resnapshot] | list[Verification], int]:
    """A lineage's re-snapshots or verifications, newest first, and how many in all."""
    table, cls = _JOBS[kind]
    total = await conn.fetchval(f"SELECT count(*) FROM {table} WHERE lineage_id = $1",
                                lineage_id)
    rows = await conn.fetch(f"SELECT * FROM {table} WHERE lineage_id = $1 "
                            "ORDER BY created_at DESC, id DESC OFFSET $2 LIMIT $3",
                            lineage_id, offset, limit)
    jobs: list[Resnapshot] | list[Verification]
    if cls is Resnapshot:
        jobs = [Resnapshot.from_record(r) for r in rows]
    else:
        jobs = [Verification.from_record(r) for r in rows]
    return jobs, int(total)
