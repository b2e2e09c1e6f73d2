"""A periodic one-line INFO summary of ingest throughput, from the ingest counters.

Every ``interval`` seconds in which something was received::

    ingest last 60s: 5120 message(s) (85.3/s): 4980 materialized, 100 staged,
    30 duplicate, 10 rejected; 612000 row(s) written; 41 group(s) of 121.5 on average;
    0 in flight

An idle worker logs nothing (its ``/metrics`` and ``/readyz`` say it is alive).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import NoReturn

from edgesync.observe._ingest_metrics import IngestMetrics
from edgesync.protocol import periodic_loop

__all__ = ["ThroughputLog"]

_log = logging.getLogger("edgesync.ingest")
_ORDER = ("materialized", "staged", "duplicate", "rejected", "ignored", "failed", "abandoned")


def _read(metrics: IngestMetrics) -> Counter[str]:
    """Totals so far: ``received``, each outcome, ``rows``, ``groups``, ``batches``,
    ``in_flight``."""
    out: Counter[str] = Counter()
    for family in metrics.registry.collect():
        for s in family.samples:
            if s.name == "edgesync_ingest_messages_received_total":
                out["received"] += int(s.value)
            elif s.name == "edgesync_ingest_messages_total":
                out[s.labels["outcome"]] += int(s.value)
            elif s.name == "edgesync_ingest_rows_total" and s.labels["outcome"] == "materialized":
                out["rows"] += int(s.value)
            elif s.name == "edgesync_ingest_group_size_count":
                out["groups"] += int(s.value)
            elif s.name == "edgesync_ingest_group_size_sum":
                out["batches"] += int(s.value)
            elif s.name == "edgesync_ingest_messages_in_flight":
                out["in_flight"] += int(s.value)
    return out


class ThroughputLog:
    def __init__(self, metrics: IngestMetrics, *, interval: float = 60.0) -> None:
        self._metrics = metrics
        self._interval = interval
        self._last = _read(metrics)
        self._at = time.monotonic()

    async def run(self) -> NoReturn:
        await periodic_loop("throughput log", self._round, interval=self._interval,
                            logger=logging.getLogger(__name__))

    async def _round(self) -> None:
        line = self.summary()
        if line is not None:
            _log.info("%s", line)

    def summary(self) -> str | None:
        """The line for the time since the last call (None: nothing received)."""
        now, totals = time.monotonic(), _read(self._metrics)
        delta = totals - self._last  # Counter subtraction keeps positive counts only
        seconds = max(now - self._at, 1e-9)
        self._last, self._at = totals, now
        if not delta["received"]:
            return None
        outcomes = ", ".join(f"{delta[o]} {o}" for o in _ORDER if delta[o])
        groups = (f"{delta['groups']} group(s) of {delta['batches'] / delta['groups']:.1f} on "
                  "average" if delta["groups"] else "no groups")
        return (f"ingest last {seconds:.0f}s: {delta['received']} message(s) "
                f"({delta['received'] / seconds:.1f}/s): {outcomes or 'none ended'}; "
                f"{delta['rows']} row(s) written; {groups}; {totals['in_flight']} in flight")
