"""What ingest did with one message."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

from edgesync.governance import StagingReason
from edgesync.protocol import RejectionCode

__all__ = ["IngestOutcome", "LedgerOutcome", "OutcomeCode", "OutcomeStatus", "UploadCode"]


class OutcomeStatus(enum.StrEnum):
    MATERIALIZED = "materialized"
    STAGED = "staged"
    DUPLICATE = "duplicate"
    REJECTED = "rejected"
    IGNORED = "ignored"


class LedgerOutcome(enum.StrEnum):
    """A received batch's row in the ledger (``edge_export_segments.outcome``)."""

    MATERIALIZED = "materialized"
    STAGED = "staged"
    REJECTED = "rejected"


class UploadCode(enum.StrEnum):
    """The code of a staged outcome that is an object upload's finalize."""

    UPLOAD_FINALIZED = "upload_finalized"


# Why: a rejection (or an ignored message), a staging reason, or an upload's finalize.
OutcomeCode = RejectionCode | StagingReason | UploadCode


@dataclass(frozen=True, slots=True)
class IngestOutcome:
    status: OutcomeStatus
    code: OutcomeCode | None = None
    detail: str | None = None
    lineage_id: uuid.UUID | None = None
    rows: int = 0
