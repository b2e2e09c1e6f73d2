"""Staging of rows that cannot be materialized yet, and their replay."""

from edgesync.staging._replayer import Replayer
from edgesync.staging._staged import (
    list_staged_rows,
    stage_row_batch,
    stage_telemetry_batch,
    unstage,
)

__all__ = ["Replayer", "list_staged_rows", "stage_row_batch", "stage_telemetry_batch", "unstage"]
