"""Staging of rows that cannot be materialized yet, and their replay."""

from edgesync.staging._replayer import Replayer
from edgesync.staging._staged import (
    STAGING_REASONS,
    StagedBatch,
    StagedRow,
    discard_staged,
    label_schema_rejected,
    list_staged_rows,
    requeue_failed,
    stage_many,
    unstage_many,
)

__all__ = ["STAGING_REASONS", "Replayer", "StagedBatch", "StagedRow", "discard_staged",
           "label_schema_rejected", "list_staged_rows", "requeue_failed", "stage_many",
           "unstage_many"]
