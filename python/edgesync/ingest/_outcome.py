"""What ingest did with one message."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

__all__ = ["IngestOutcome", "OutcomeStatus"]


class OutcomeStatus(enum.StrEnum):
    MATERIALIZED = "materialized"
    STAGED = "staged"
    DUPLICATE = "duplicate"
    REJECTED = "rejected"
    IGNORED = "ignored"


@dataclass(frozen=True, slots=True)
class IngestOutcome:
    status: OutcomeStatus
    code: str | None = None
    detail: str | None = None
    lineage_id: uuid.UUID | None = None
    rows: int = 0
