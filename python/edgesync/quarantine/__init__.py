"""Per-row quarantine: rows that could not be written, kept apart with why, while their
batch's other rows and their lineage go on; operators list, inspect, edit and retry, or
discard them (docs/recovery.md)."""

from edgesync.quarantine._retry import RetryOutcome, RetryTotals, retry_all, retry_row
from edgesync.quarantine._rows import (
    QuarantinedRow,
    QuarantineStatus,
    count_open,
    discard,
    get_row,
    list_rows,
    quarantine_refused,
    sweep,
)

__all__ = [
    "QuarantineStatus",
    "QuarantinedRow",
    "RetryOutcome",
    "RetryTotals",
    "count_open",
    "discard",
    "get_row",
    "list_rows",
    "quarantine_refused",
    "retry_all",
    "retry_row",
    "sweep",
]
