"""Models of re-snapshots and verifications (``routes.recovery``, the lineage detail)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from edgesync import control

__all__ = ["RecoveryOfferOut", "RecoveryState", "ResnapshotBody", "ResnapshotOut",
           "VerificationOut", "VerifyBody"]


class ResnapshotBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    filter: dict[str, Any] | None = Field(
        None, description='rows to send again: {"where": [{"column", "op", "value"}], '
                          '"key_range": {"from": {...}, "to": {...}}, "buckets": '
                          '{"prefix": 2, "values": ["0a"]}}; none: the whole table')


class ResnapshotOut(BaseModel):
    id: uuid.UUID
    lineage_id: uuid.UUID
    device_id: uuid.UUID
    filter: dict[str, Any]
    status: control.ResnapshotStatus
    rows_sent: int
    chunks: int
    journal_epoch: uuid.UUID | None
    first_commit_seq: int | None
    last_commit_seq: int | None
    swept_rows: int | None
    verification_id: uuid.UUID | None
    error: str | None
    requested_by: str | None
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None


class VerifyBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prefix: int = Field(control.DEFAULT_VERIFY_PREFIX, ge=1, le=3,
                        description="hex digits of _edge_pk_hash naming a bucket (2: 256)")
    repair: bool = Field(False, description="re-snapshot the buckets that differ")


class VerificationOut(BaseModel):
    id: uuid.UUID
    lineage_id: uuid.UUID
    device_id: uuid.UUID
    prefix: int
    columns: list[dict[str, Any]]
    skipped_columns: list[str]
    repair: bool
    status: control.VerificationStatus
    device_rows: int | None
    cloud_rows: int | None
    differing_buckets: list[str] | None
    changed_buckets: list[str] | None
    resnapshot_id: uuid.UUID | None
    error: str | None
    requested_by: str | None
    created_at: datetime
    completed_at: datetime | None


class RecoveryState(BaseModel):
    """The lineage's newest re-snapshot and verification (lists: …/resnapshots,
    …/verifications)."""

    resnapshot: ResnapshotOut | None = None
    verification: VerificationOut | None = None


class RecoveryOfferOut(BaseModel):
    """A re-snapshot or verification the lineage's detail offers, and why (rules:
    docs/recovery.md, "Offered at the right moment"). Taken with ``POST
    …/lineages/{id}/resnapshot`` (whole table: body ``{}``) or ``…/verify``."""

    action: control.RecoveryAction
    reason: control.OfferReason
    detail: str = Field(description="why, in one sentence for a person")
    since_ms: int = Field(description="offered since (epoch ms): when the first gap not "
                                      "repaired yet was reported, or when the lineage was "
                                      "re-created")
    gap_id: int | None = Field(None, description="capture_gap: that gap's id "
                                                 "(edge_capture_gaps)")

    @classmethod
    def of(cls, offer: control.RecoveryOffer) -> RecoveryOfferOut:
        return cls(action=offer.action, reason=offer.reason, detail=offer.detail,
                   since_ms=int(offer.since.timestamp() * 1000), gap_id=offer.gap_id)
