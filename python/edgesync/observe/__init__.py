"""Operability: readiness checks, Prometheus metrics, structured logs.

Nothing here decides anything: the other packages record into it at one seam each
(``IngestPipeline.handle``, the group writer's ``on_group`` hook, the loop helper's
liveness table), and ``/readyz``, ``/metrics`` and the log formatter read it.
docs/operations.md is the catalogue.
"""

from edgesync.observe._health import (
    DB_TIMEOUT,
    Check,
    Readiness,
    ReadinessReport,
    database_checks,
    loop_checks,
    report,
)
from edgesync.observe._ingest_metrics import (
    ABANDONED,
    FAILED,
    UNKNOWN_KIND,
    IngestMetrics,
    kind_label,
)
from edgesync.observe._presence import FLUSH_INTERVAL_S, Committed, Presence

__all__ = [
    "ABANDONED",
    "DB_TIMEOUT",
    "FAILED",
    "FLUSH_INTERVAL_S",
    "UNKNOWN_KIND",
    "Check",
    "Committed",
    "IngestMetrics",
    "Presence",
    "Readiness",
    "ReadinessReport",
    "database_checks",
    "kind_label",
    "loop_checks",
    "report",
]
