"""Staging of rows that cannot be materialized yet (replayed by ``edgesync.ingest.Replayer``)."""

from edgesync.staging._staged import (
    STAGING_REASONS,
    StagedBatch,
    StagedRow,
    discard_staged,
    label_schema_rejected,
    list_staged_rows,
    mark_materialization_failed,
    requeue_failed,
    stage_many,
    unstage_many,
)

__all__ = ["STAGING_REASONS", "StagedBatch", "StagedRow", "discard_staged",
           "label_schema_rejected", "list_staged_rows", "mark_materialization_failed",
           "requeue_failed", "stage_many", "unstage_many"]
