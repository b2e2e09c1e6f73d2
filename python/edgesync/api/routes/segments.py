"""``/edge/segments``: the batch ledger — every batch a device sent, with its outcome and,
for refused ones, the rejection code, field and detail."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel

from edgesync.api._auth import CanRead
from edgesync.api._db import Db
from edgesync.api._envelopes import Page
from edgesync.api._errors import error_responses
from edgesync.api._pagination import Paging
from edgesync.ingest import LedgerOutcome

__all__ = ["router"]

router = APIRouter(prefix="/core/api/v1/projects/{project_id}/edge/segments",
                   tags=["segments"])


Outcome = Literal[LedgerOutcome.MATERIALIZED, LedgerOutcome.STAGED, LedgerOutcome.REJECTED]


class SegmentOut(BaseModel):
    id: int
    device_id: uuid.UUID
    lineage_id: uuid.UUID | None
    batch_id: uuid.UUID | None
    topic_kind: str
    source_table: str | None
    outcome: Outcome
    rejection_code: str | None
    rejection_field: str | None
    rejection_detail: str | None
    schema_hash: str | None
    first_commit_seq: int | None
    last_commit_seq: int | None
    batch_seq: int | None
    row_count: int
    payload_bytes: int
    received_at: datetime


_WHERE = ("WHERE d.project_id = $1 AND ($2::uuid IS NULL OR s.device_id = $2) "
          "AND ($3::uuid IS NULL OR s.lineage_id = $3) AND ($4::text IS NULL OR s.outcome = $4) "
          "AND ($5::text IS NULL OR s.rejection_code = $5)")


@router.get("", response_model=Page[SegmentOut], responses=error_responses(400, 401, 404, 422),
            summary="Batches received (the ledger), newest first; filter by outcome or code")
async def list_segments(
    access: CanRead, conn: Db, paging: Paging,
    device_id: Annotated[uuid.UUID | None, Query()] = None,
    lineage_id: Annotated[uuid.UUID | None, Query()] = None,
    outcome: Annotated[Outcome | None, Query()] = None,
    rejection_code: Annotated[str | None, Query(max_length=100)] = None,
) -> Page[SegmentOut]:
    args = (access.project_id, device_id, lineage_id, outcome, rejection_code)
    total = await conn.fetchval(
        "SELECT count(*) FROM edge_export_segments s JOIN edge_devices d ON d.id = s.device_id "
        + _WHERE, *args)
    rows = await conn.fetch(
        "SELECT s.* FROM edge_export_segments s JOIN edge_devices d ON d.id = s.device_id "
        + _WHERE + " ORDER BY s.id DESC OFFSET $6 LIMIT $7", *args, paging.offset, paging.limit)
    return paging.of([SegmentOut.model_validate(dict(r)) for r in rows], int(total))
