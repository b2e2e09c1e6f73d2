"""The states of schema decisions: reviews (device and registry) and the schema versions
and registry entries they decide. The values are those of the ``status`` columns
(migrations 0001, 0009), the API and the CLI's ``--status`` choices."""

from __future__ import annotations

import enum

__all__ = ["ReviewStatus", "SchemaStatus"]


class ReviewStatus(enum.StrEnum):
    """A review: ``queued → in_review → approved | rejected | abandoned``."""

    QUEUED = "queued"
    IN_REVIEW = "in_review"
    APPROVED = "approved"
    REJECTED = "rejected"
    ABANDONED = "abandoned"


class SchemaStatus(enum.StrEnum):
    """A device schema version or a registry entry (a version is never ``abandoned``:
    an abandoned registry entry hands its versions back to device reviews)."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    ABANDONED = "abandoned"
