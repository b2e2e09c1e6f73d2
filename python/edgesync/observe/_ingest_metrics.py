"""Ingest counters of one process, recorded at one seam: ``IngestPipeline.handle``.

The conservation rule, per topic kind (``kind`` label), holds at every scrape::

    edgesync_ingest_messages_received_total{kind}
        = sum over outcome, code of edgesync_ingest_messages_total{kind, outcome, code}
        + edgesync_ingest_messages_in_flight{kind}

where ``outcome`` is materialized, staged, duplicate, rejected, ignored, or one of the
two ends that are not an outcome of the message: ``failed`` (``handle`` raised; the
consumer logged it) and ``abandoned`` (cancelled before its outcome committed, e.g.
a lost broker connection; the broker delivers it again). A message counts as received
when ``handle`` starts and leaves ``in flight`` when it ends, in the same turn of the
event loop as its outcome is counted, so a scrape never sees it twice or not at all.

Labels are bounded: ``kind`` is a topic kind (or ``unknown`` for a topic that is not a
device sync topic), ``code`` a rejection code or staging reason (empty otherwise),
``pipeline`` rows or telemetry. No device, lineage or project id is ever a label.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from edgesync.protocol import Pipeline, TopicKind

__all__ = ["ABANDONED", "FAILED", "UNKNOWN_KIND", "IngestMetrics", "kind_label"]

UNKNOWN_KIND = "unknown"
# The two ends of a message that are not an outcome of it.
FAILED = "failed"
ABANDONED = "abandoned"
# Outcomes whose rows were written (to a target, or to staging).
_WRITTEN = ("materialized", "staged")
_TELEMETRY = TopicKind.TELEMETRY_BATCH.name.lower()
# Seconds: from a few ms (a group of one on a local database) to a stuck minute.
_LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            30.0, 60.0)
_GROUP_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def kind_label(kind: TopicKind | None) -> str:
    """``sync/rows/batch`` → ``rows_batch``; None (not a sync topic) → ``unknown``."""
    return UNKNOWN_KIND if kind is None else kind.name.lower()


class IngestMetrics:
    """The ingest families, on ``registry`` (default: one of its own, so two pipelines
    in a process never mix their counts)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.received = Counter("edgesync_ingest_messages_received",
                                "Messages handed to the ingest pipeline, by topic kind",
                                ["kind"], registry=r)
        self.messages = Counter("edgesync_ingest_messages",
                                "Messages whose handling ended, by topic kind, outcome and "
                                "rejection code or staging reason", ["kind", "outcome", "code"],
                                registry=r)
        self.in_flight = Gauge("edgesync_ingest_messages_in_flight",
                               "Messages being handled now (received, no outcome yet)",
                               ["kind"], registry=r)
        self.rows = Counter("edgesync_ingest_rows",
                            "Rows of batches materialized or staged by live ingest, by "
                            "pipeline (rows: state tables, telemetry: time series)",
                            ["pipeline", "outcome"], registry=r)
        self.batch_bytes = Counter("edgesync_ingest_batch_bytes",
                                   "Bytes of row and telemetry batch messages: as received "
                                   "(zstd frames or plain JSON) and as JSON once inflated; "
                                   "their ratio is the fleet's compression", ["form"],
                                   registry=r)
        self.latency = Histogram("edgesync_ingest_duration_seconds",
                                 "From a message's hand-over to its committed outcome, by "
                                 "topic kind", ["kind"], buckets=_LATENCY, registry=r)
        self.group_size = Histogram("edgesync_ingest_group_size",
                                    "Batch messages written per group transaction",
                                    buckets=_GROUP_SIZES, registry=r)
        self.group_latency = Histogram("edgesync_ingest_group_commit_seconds",
                                       "From a group's start to its commit (retries and "
                                       "splits included)", buckets=_LATENCY, registry=r)
        # Label children by (family, labels): ``labels()`` takes a lock and validates
        # its arguments, a few microseconds that every message paid six times.
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        for kind in (*TopicKind, None):
            # Known kinds appear at 0 from the first scrape (rate() needs a start).
            self.received.labels(kind_label(kind))
            self.in_flight.labels(kind_label(kind))

    def _child(self, family: Counter | Gauge | Histogram, *labels: str) -> Any:
        key = (id(family), labels)  # the families live as long as this object
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = family.labels(*labels)
        return child

    def started(self, kind: str) -> None:
        self._child(self.received, kind).inc()
        self._child(self.in_flight, kind).inc()

    def ended(self, kind: str, outcome: str, code: str | None = None, rows: int = 0,
              seconds: float | None = None) -> None:
        """One message's end: its outcome (an ``OutcomeStatus`` value) with its code and
        rows, or ``FAILED``/``ABANDONED``; ``seconds`` since it was received."""
        self._child(self.in_flight, kind).dec()
        self._child(self.messages, kind, outcome, code or "").inc()
        if seconds is not None:
            self._child(self.latency, kind).observe(seconds)
        if rows and outcome in _WRITTEN:
            pipeline = Pipeline.TELEMETRY if kind == _TELEMETRY else Pipeline.ROWS
            self._child(self.rows, pipeline, outcome).inc(rows)

    def batch_received(self, wire: int, json: int) -> None:
        """Bytes of a batch message: as received, and as JSON (see ``batch_bytes``)."""
        if wire:
            self._child(self.batch_bytes, "received").inc(wire)
        if json:
            self._child(self.batch_bytes, "json").inc(json)

    def group_written(self, size: int, seconds: float) -> None:
        """The group writer's hook: one group committed."""
        self.group_size.observe(size)
        self.group_latency.observe(seconds)
