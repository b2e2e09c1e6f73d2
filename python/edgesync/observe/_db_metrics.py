"""Gauges computed from the database at scrape time: what every worker shares.

Staging backlogs, lineages by status and pause reason, the controls outbox, replay,
open reviews and how long ago each device was last heard of are properties of the
database, not of one worker: any worker's ``/metrics`` shows the same values (take one
worker's, or ``max`` across workers, never ``sum``). Values are aggregates; per-project,
per-lineage and per-device figures are in the HTTP API.

Pauses and breaker trips are counted from the ``edge_events`` rows the pauses emitted,
incrementally (each scrape reads only the events after the last one it counted), so
they are counters across every worker and survive restarts (an event whose
transaction commits after a later one was counted is missed: pauses are rare, and the
``edgesync_lineages`` gauge has the current state exactly).

``refresh()`` runs the queries (bounded by ``timeout``); ``collect()`` — what
``prometheus_client`` calls — returns the last snapshot, with
``edgesync_database_scrape_ok`` 0 when the last refresh failed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import asyncpg
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeHistogramMetricFamily,
    GaugeMetricFamily,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from edgesync.control import ControlStatus
from edgesync.governance import ReplayStatus
from edgesync.protocol import Pipeline

__all__ = ["LAST_SEEN_BUCKETS", "DatabaseCollector"]

PAUSED_EVENT = "integration.edge_table_lineage.ingestion_paused.v1"
# Seconds since a device was last heard of: a live device is in the first buckets, one
# switched off for the night past the hour, a lost one past the day.
LAST_SEEN_BUCKETS = (10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 6 * 3600.0, 86400.0, 7 * 86400.0)

_LINEAGES = """
SELECT pipeline, status, coalesce(pause_reason, '') AS reason, count(*) AS n,
       coalesce(sum(staged_rows), 0) AS staged_rows, coalesce(sum(staged_bytes), 0) AS staged_bytes
FROM edge_table_lineages GROUP BY 1, 2, 3
"""
_PROJECT_MAX = """
SELECT coalesce(max(r), 0) AS rows, coalesce(max(b), 0) AS bytes FROM (
  SELECT sum(staged_rows) AS r, sum(staged_bytes) AS b FROM edge_table_lineages
  GROUP BY project_id) p
"""
_CONTROLS = f"""
SELECT status, control_kind AS kind, count(*) AS n,
       count(*) FILTER (WHERE attempts > 1) AS resent,
       coalesce(sum(greatest(attempts - 1, 0)), 0) AS resends,
       coalesce(extract(epoch FROM now() - min(created_at)
                FILTER (WHERE status = '{ControlStatus.PENDING}')), 0) AS oldest
FROM edge_pending_controls GROUP BY 1, 2
"""
_REPLAY = """
SELECT status, count(*) AS n, coalesce(sum(rows_replayed), 0) AS rows
FROM edge_replay_intents GROUP BY 1
"""
_REPLAY_LEFT = f"""
SELECT coalesce(sum(l.staged_rows), 0) FROM edge_table_lineages l
WHERE EXISTS (SELECT 1 FROM edge_replay_intents i
              WHERE i.lineage_id = l.id AND i.status = '{ReplayStatus.PENDING}')
"""
_REVIEWS = """
SELECT status, count(*) AS n FROM edge_schema_reviews
WHERE status IN ('queued', 'in_review') GROUP BY 1
"""
# The newest ledger row of each lineage (one probe of the (lineage_id, id) index each),
# the newest per device: when it last sent a batch. Never-seen devices give NULL.
_LAST_SEEN = """
SELECT extract(epoch FROM now() - max(s.received_at)) AS age
FROM edge_devices d
LEFT JOIN edge_table_lineages l ON l.device_id = d.id
LEFT JOIN LATERAL (SELECT received_at FROM edge_export_segments e
                   WHERE e.lineage_id = l.id ORDER BY e.id DESC LIMIT 1) s ON true
GROUP BY d.id
"""
_RECOVERY = """
SELECT 'verification' AS job, status, count(*) AS n FROM edge_verifications GROUP BY 2
UNION ALL SELECT 'resnapshot', status, count(*) FROM edge_resnapshots GROUP BY 2
"""
# Lineages whose newest verification found differing buckets.
_DIFFERING = """
SELECT count(*) FROM (SELECT DISTINCT ON (lineage_id) status FROM edge_verifications
                      WHERE status <> 'requested' ORDER BY lineage_id, created_at DESC) v
WHERE v.status = 'different'
"""
_PAUSES = """
SELECT coalesce(body->>'reason', '') AS reason, count(*) AS n FROM edge_events
WHERE id > $1 AND id <= $2 AND event_type = $3 GROUP BY 1
"""


def _go_float(bound: float) -> str:
    """A bucket bound as prometheus_client writes its own (``10.0``, ``3600.0``)."""
    return repr(float(bound))


class DatabaseCollector(Collector):
    def __init__(self, pool: Callable[[], asyncpg.Pool | None], *, timeout: float = 5.0) -> None:
        self._pool = pool
        self._timeout = timeout
        self._families: list[Metric] = []
        self._ok = False
        self._seconds = 0.0
        # Pauses counted so far, by reason, and the last event id they cover.
        self._pauses: dict[str, int] = {}
        self._events_seen = 0
        self._lock = asyncio.Lock()

    async def refresh(self) -> None:
        async with self._lock:  # two scrapes at once: one set of queries after the other
            started = time.perf_counter()
            pool = self._pool()
            try:
                if pool is None:
                    raise ConnectionError("no database pool")
                async with asyncio.timeout(self._timeout), pool.acquire() as conn:
                    self._families = await self._query(conn)
                self._ok = True
            except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                self._ok = False  # the previous snapshot stays (marked stale by _ok)
            self._seconds = time.perf_counter() - started

    async def _query(self, conn: Any) -> list[Metric]:
        out: list[Metric] = []
        lineages = GaugeMetricFamily("edgesync_lineages", "Lineages by pipeline, status and "
                                     "pause reason", labels=["pipeline", "status", "reason"])
        staged_rows = GaugeMetricFamily("edgesync_staged_rows", "Rows held in staging, by "
                                        "pipeline (all projects)", labels=["pipeline"])
        staged_bytes = GaugeMetricFamily("edgesync_staged_bytes", "Compressed bytes held in "
                                         "staging, by pipeline (all projects)",
                                         labels=["pipeline"])
        totals: dict[str, list[int]] = {}
        for r in await conn.fetch(_LINEAGES):
            lineages.add_metric([r["pipeline"], r["status"], r["reason"]], r["n"])
            t = totals.setdefault(r["pipeline"], [0, 0])
            t[0] += int(r["staged_rows"])
            t[1] += int(r["staged_bytes"])
        for pipeline in Pipeline:
            t = totals.get(pipeline, [0, 0])
            staged_rows.add_metric([pipeline], t[0])
            staged_bytes.add_metric([pipeline], t[1])
        out += [lineages, staged_rows, staged_bytes]
        top = await conn.fetchrow(_PROJECT_MAX)
        out.append(GaugeMetricFamily("edgesync_staged_rows_project_max",
                                     "Staged rows of the project with the most",
                                     value=top["rows"]))
        out.append(GaugeMetricFamily("edgesync_staged_bytes_project_max",
                                     "Staged bytes of the project with the most",
                                     value=top["bytes"]))
        out += await self._controls(conn)
        out += await self._replay(conn)
        reviews = GaugeMetricFamily("edgesync_reviews_open", "Schema reviews waiting for an "
                                    "operator, by status", labels=["status"])
        found = {r["status"]: r["n"] for r in await conn.fetch(_REVIEWS)}
        for status in ("queued", "in_review"):
            reviews.add_metric([status], found.get(status, 0))
        out.append(reviews)
        out += await self._last_seen(conn)
        out += await self._recovery(conn)
        out += await self._pauses_counted(conn)
        return out

    async def _recovery(self, conn: Any) -> list[Metric]:
        found = {(r["job"], r["status"]): r["n"] for r in await conn.fetch(_RECOVERY)}
        ver = GaugeMetricFamily("edgesync_verifications", "Verifications (docs/recovery.md) "
                                "by result", labels=["status"])
        for status in ("requested", "equal", "different", "failed"):
            ver.add_metric([status], found.get(("verification", status), 0))
        res = GaugeMetricFamily("edgesync_resnapshots", "Re-snapshots by status",
                                labels=["status"])
        for status in ("requested", "running", "completed", "failed"):
            res.add_metric([status], found.get(("resnapshot", status), 0))
        differing = GaugeMetricFamily("edgesync_lineages_verified_different",
                                      "Lineages whose newest verification found differing "
                                      "buckets", value=await conn.fetchval(_DIFFERING))
        return [ver, res, differing]

    async def _controls(self, conn: Any) -> list[Metric]:
        controls = GaugeMetricFamily("edgesync_controls", "Downlink controls in the outbox by "
                                     "status (pending: not acknowledged yet) and kind",
                                     labels=["status", "kind"])
        resent = GaugeMetricFamily("edgesync_controls_resent", "Controls published more than "
                                   "once, by status", labels=["status"])
        resends = GaugeMetricFamily("edgesync_controls_resends", "Publications beyond the "
                                    "first, summed over the outbox", labels=["status"])
        oldest = 0.0
        by_status: dict[str, list[int]] = {}
        for r in await conn.fetch(_CONTROLS):
            controls.add_metric([r["status"], r["kind"]], r["n"])
            s = by_status.setdefault(r["status"], [0, 0])
            s[0] += int(r["resent"])
            s[1] += int(r["resends"])
            oldest = max(oldest, float(r["oldest"]))
        for status in ControlStatus:
            if status not in by_status:
                controls.add_metric([status, ""], 0)
            s = by_status.get(status, [0, 0])
            resent.add_metric([status], s[0])
            resends.add_metric([status], s[1])
        age = GaugeMetricFamily("edgesync_controls_oldest_pending_age_seconds",
                                "Age of the oldest unacknowledged control (0: none)",
                                value=oldest)
        return [controls, resent, resends, age]

    async def _replay(self, conn: Any) -> list[Metric]:
        intents = GaugeMetricFamily("edgesync_replay_intents", "Replay intents by status",
                                    labels=["status"])
        done = GaugeMetricFamily("edgesync_replay_rows_done", "Rows replayed from staging, "
                                 "summed over replay intents, by intent status",
                                 labels=["status"])
        found = {r["status"]: r for r in await conn.fetch(_REPLAY)}
        for status in ReplayStatus:
            rec = found.get(status)
            intents.add_metric([status], rec["n"] if rec else 0)
            done.add_metric([status], rec["rows"] if rec else 0)
        left = GaugeMetricFamily("edgesync_replay_rows_left", "Rows staged in lineages that "
                                 "have a pending replay intent",
                                 value=await conn.fetchval(_REPLAY_LEFT))
        return [intents, done, left]

    async def _last_seen(self, conn: Any) -> list[Metric]:
        ages = [r["age"] for r in await conn.fetch(_LAST_SEEN)]
        seen = sorted(float(a) for a in ages if a is not None)
        buckets, i = [], 0
        for bound in LAST_SEEN_BUCKETS:
            while i < len(seen) and seen[i] <= bound:
                i += 1
            buckets.append((_go_float(bound), float(i)))
        buckets.append(("+Inf", float(len(seen))))
        histogram = GaugeHistogramMetricFamily(
            "edgesync_device_last_seen_age_seconds",
            "Devices by seconds since their last batch reached the ledger",
            buckets=buckets, gsum_value=sum(seen))
        devices = GaugeMetricFamily("edgesync_devices", "Registered devices, by whether a "
                                    "batch of theirs ever reached the ledger", labels=["seen"])
        devices.add_metric(["yes"], len(seen))
        devices.add_metric(["never"], len(ages) - len(seen))
        return [histogram, devices]

    async def _pauses_counted(self, conn: Any) -> list[Metric]:
        newest = int(await conn.fetchval("SELECT coalesce(max(id), 0) FROM edge_events"))
        if newest > self._events_seen:
            for r in await conn.fetch(_PAUSES, self._events_seen, newest, PAUSED_EVENT):
                self._pauses[r["reason"]] = self._pauses.get(r["reason"], 0) + int(r["n"])
            self._events_seen = newest
        pauses = CounterMetricFamily("edgesync_lineage_pauses", "Pauses sent to devices "
                                     "(backpressure, circuit_breaker), by reason",
                                     labels=["reason"])
        for reason in sorted({"backpressure", "circuit_breaker", *self._pauses}):
            pauses.add_metric([reason], self._pauses.get(reason, 0))
        trips = CounterMetricFamily("edgesync_breaker_trips", "Times the materialization "
                                    "circuit breaker paused a lineage",
                                    value=self._pauses.get("circuit_breaker", 0))
        return [pauses, trips]

    def collect(self) -> Iterator[Metric]:
        yield from self._families
        yield GaugeMetricFamily("edgesync_database_scrape_ok", "1 when the database "
                                "figures below are from this scrape, 0 when it failed "
                                "(then they are the last good ones)", value=1 if self._ok else 0)
        yield GaugeMetricFamily("edgesync_database_scrape_seconds",
                                "Time the database queries of the last scrape took",
                                value=self._seconds)
