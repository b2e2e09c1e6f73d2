"""Staging of rows that cannot be materialized yet, and their replay."""

from edgesync.staging._replayer import Replayer
from edgesync.staging._staged import StagedBatch, list_staged_rows, stage_many, unstage_many

__all__ = ["Replayer", "StagedBatch", "list_staged_rows", "stage_many", "unstage_many"]
