"""The server's words the TUI and the CLI compare with what the API answers.

Written by ``python -m edgesync.api._vocabulary`` from the enums that own them
(edgesync.api._vocabulary names them): do not edit by hand. It imports nothing,
so the TUI and an agent-only install's CLI can load it."""

from __future__ import annotations

import enum

__all__ = [
    "ColumnActionKind",
    "LineageStatus",
    "PauseReason",
    "Pipeline",
    "QuarantineStatus",
    "ReplayStatus",
    "ReviewStatus",
    "SchemaStatus",
    "StagingReason",
    "SyncAuthority",
]


class Pipeline(enum.StrEnum):
    ROWS = "rows"
    TELEMETRY = "telemetry"


class LineageStatus(enum.StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"


class PauseReason(enum.StrEnum):
    SCHEMA_REVIEW = "schema_review"
    DEFERRED_COLUMNS = "deferred_columns"
    BACKPRESSURE = "backpressure"
    CIRCUIT_BREAKER = "circuit_breaker"


class SyncAuthority(enum.StrEnum):
    DEVICE = "device_authoritative"
    CLOUD = "cloud_authoritative"


class ReviewStatus(enum.StrEnum):
    QUEUED = "queued"
    IN_REVIEW = "in_review"
    APPROVED = "approved"
    REJECTED = "rejected"
    ABANDONED = "abandoned"


class SchemaStatus(enum.StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    ABANDONED = "abandoned"


class ColumnActionKind(enum.StrEnum):
    MIRROR = "mirror"
    MAP = "map"
    IGNORE = "ignore"
    DEFER = "defer"
    AUTO_CREATE_AND_MAP = "auto_create_and_map"


class QuarantineStatus(enum.StrEnum):
    OPEN = "open"
    SUPERSEDED = "superseded"
    RETRIED = "retried"


class StagingReason(enum.StrEnum):
    SCHEMA_REVIEW = "schema_review"
    SCHEMA_REJECTED = "schema_rejected"
    LINEAGE_PAUSED = "lineage_paused"
    MATERIALIZATION_FAILED = "materialization_failed"


class ReplayStatus(enum.StrEnum):
    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"
