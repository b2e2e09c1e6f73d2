"""Freshness per lineage and presence per device, aggregated in memory, flushed often.

Ingest tells ``Presence`` what committed, in memory and once per committed group
(``group_committed``, the group writer's ``on_committed`` hook), per ACK and per
device report (``seen``, ``reported``); ``run`` writes what gathered every
``interval`` seconds in two multi-row upserts (``edge_lineage_freshness``,
``edge_device_status``: this module is their only writer). No statement is added per
message, nor per group. A lost round (database away) keeps its figures for the next.

Freshness of a batch = its cloud commit time - ``first_seen_at_ms`` (when the device's
agent first saw its oldest change; docs/protocol.md "Freshness stamp"). Each committed
batch that carries the stamp is observed in ``edgesync_freshness_seconds``; the
lineage keeps its newest batch's times. With several workers each flushes its own
figures; the upserts keep the newest.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NoReturn, Protocol

import asyncpg
from prometheus_client import CollectorRegistry, Histogram

from edgesync.protocol import AgentState, Pipeline, StatusReport, TopicKind, periodic_loop
from edgesync.store import Conn

__all__ = ["FLUSH_INTERVAL_S", "Committed", "Presence"]

_log = logging.getLogger(__name__)

FLUSH_INTERVAL_S = 1.0
# Seconds: a flush interval of a few hundred ms to a device offline for a day.
_FRESHNESS = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0,
              21600.0, 86400.0)
_WRITTEN = ("materialized", "staged")


class _Scope(Protocol):
    @property
    def device_id(self) -> uuid.UUID: ...


class _Batch(Protocol):
    @property
    def first_seen_at_ms(self) -> int | None: ...


class _Outcome(Protocol):
    @property
    def status(self) -> str: ...
    @property
    def lineage_id(self) -> uuid.UUID | None: ...


class Committed(Protocol):
    """A batch of a committed group (``edgesync.ingest``'s ``Work``)."""

    @property
    def scope(self) -> _Scope: ...
    @property
    def kind(self) -> TopicKind: ...
    @property
    def batch(self) -> _Batch: ...
    @property
    def outcome(self) -> _Outcome | None: ...


@dataclass(slots=True)
class _Lineage:
    committed: float  # the newest batch's commit (stamped or not)
    seen: float | None  # the newest stamped batch's first_seen_at_ms / 1000
    lag: float | None  # that batch's commit - seen


@dataclass(slots=True)
class _Device:
    seen: float | None = None  # last message from the device
    batch: float | None = None
    ack: float | None = None
    report: float | None = None
    online: bool = True
    online_at: float = 0.0  # when ``online`` was decided
    figures: dict[str, Any] = field(default_factory=dict)
    # Batch bytes since the last flush: as received (framed or not), and as JSON.
    received: int = 0
    json: int = 0

    def merge(self, older: _Device) -> None:
        """Fold in figures of an earlier round that were not written."""
        self.seen = _latest(self.seen, older.seen)
        self.batch = _latest(self.batch, older.batch)
        self.ack = _latest(self.ack, older.ack)
        if older.report is not None and (self.report is None or older.report > self.report):
            self.report = older.report
        self.figures = {**older.figures, **self.figures}
        self.received += older.received
        self.json += older.json
        if older.online_at > self.online_at:
            self.online, self.online_at = older.online, older.online_at


def _latest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def _ts(t: float | None) -> datetime | None:
    return None if t is None else datetime.fromtimestamp(t, UTC)


class Presence:
    """The in-memory aggregate of one worker, and its flush loop (``run``)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.freshness = Histogram(
            "edgesync_freshness_seconds",
            "End-to-end freshness of committed batches: cloud commit time minus when the "
            "device's agent first saw the batch's oldest change (batches that carry "
            "first_seen_at_ms), by pipeline and outcome", ["pipeline", "outcome"],
            buckets=_FRESHNESS, registry=registry if registry is not None
            else CollectorRegistry())
        self._lineages: dict[uuid.UUID, _Lineage] = {}
        self._devices: dict[uuid.UUID, _Device] = {}

    def _device(self, device_id: uuid.UUID) -> _Device:
        got = self._devices.get(device_id)
        if got is None:
            got = self._devices[device_id] = _Device()
        return got

    def group_committed(self, works: Iterable[Committed]) -> None:
        """The group writer's hook: a group's transaction committed these batches.

        Whether the device is online was decided when each batch was received
        (``received``), in the order its messages came: a batch committed after the
        agent's ``stopped`` report, but sent before it, must not bring it back online."""
        now = time.time()
        for w in works:
            out = w.outcome
            d = self._device(w.scope.device_id)
            d.seen = d.batch = now
            if out is None or out.status not in _WRITTEN or out.lineage_id is None:
                continue
            ms = w.batch.first_seen_at_ms
            seen = None if ms is None else ms / 1000
            lin = self._lineages.get(out.lineage_id)
            if lin is None:
                lin = self._lineages[out.lineage_id] = _Lineage(now, None, None)
            lin.committed = now
            if seen is not None:
                lin.seen, lin.lag = seen, now - seen
                pipeline = (Pipeline.TELEMETRY if w.kind is TopicKind.TELEMETRY_BATCH
                            else Pipeline.ROWS)
                self.freshness.labels(pipeline, out.status).observe(max(0.0, now - seen))

    def seen(self, device_id: uuid.UUID, kind: TopicKind) -> None:
        """A message of the device other than a batch (an ACK, a report)."""
        now = time.time()
        d = self._device(device_id)
        d.seen = now
        if kind is TopicKind.INGEST_ACK:
            d.ack = now
        d.online, d.online_at = True, now

    def received(self, device_id: uuid.UUID, wire: int, json: int) -> None:
        """A batch message of the device, as it arrives: a sign of life, in arrival order
        with its reports; ``wire`` bytes as it came (a zstd frame or plain JSON), ``json``
        once inflated (the group writer calls it once for each, a frame's JSON later)."""
        d = self._device(device_id)
        if wire:
            now = time.time()
            d.seen = now
            d.online, d.online_at = True, now
        d.received += wire
        d.json += json

    def reported(self, device_id: uuid.UUID, report: StatusReport) -> None:
        """The agent's status report (its will, ``offline``, comes from the broker: it
        says nothing of when the device was last heard from)."""
        now = time.time()
        d = self._device(device_id)
        if report.state is not AgentState.OFFLINE:
            d.seen = now
        d.report = now
        d.figures = {**d.figures, **report.doc, "state": report.state.value}
        d.online, d.online_at = report.state is AgentState.RUNNING, now

    async def run(self, pool: asyncpg.Pool) -> NoReturn:
        await periodic_loop("presence", lambda: self.flush(pool), interval=FLUSH_INTERVAL_S,
                            logger=_log)

    async def flush(self, pool: asyncpg.Pool) -> None:
        """Write what gathered since the last flush (kept for the next on failure)."""
        lineages, self._lineages = self._lineages, {}
        devices, self._devices = self._devices, {}
        if not lineages and not devices:
            return
        try:
            async with pool.acquire() as conn, conn.transaction():
                if devices:
                    await _write_devices(conn, devices)
                if lineages:
                    await _write_lineages(conn, lineages)
        except BaseException:
            for lid, lin in lineages.items():
                newer = self._lineages.get(lid)
                if newer is None:
                    self._lineages[lid] = lin
                elif newer.seen is None:  # nothing stamped since: the older stamp stands
                    newer.seen, newer.lag = lin.seen, lin.lag
            for did, dev in devices.items():
                newer_dev = self._devices.get(did)
                if newer_dev is None:
                    self._devices[did] = dev
                else:
                    newer_dev.merge(dev)
            raise


_DEVICES = """
INSERT INTO edge_device_status AS s (device_id, last_seen_at, last_batch_at, last_ack_at,
                                     last_report_at, online, online_at, report,
                                     batch_bytes_received, batch_bytes_json)
SELECT u.device_id, u.seen, u.batch, u.ack, u.report, u.online,
       u.online_at, u.figures, u.received, u.json
FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[], $4::timestamptz[],
            $5::timestamptz[], $6::boolean[], $7::timestamptz[], $8::jsonb[],
            $9::bigint[], $10::bigint[])
     AS u(device_id, seen, batch, ack, report, online, online_at, figures, received, json)
JOIN edge_devices d ON d.id = u.device_id
ORDER BY u.device_id
ON CONFLICT (device_id) DO UPDATE SET
    last_seen_at = greatest(s.last_seen_at, EXCLUDED.last_seen_at),
    last_batch_at = greatest(s.last_batch_at, EXCLUDED.last_batch_at),
    last_ack_at = greatest(s.last_ack_at, EXCLUDED.last_ack_at),
    last_report_at = greatest(s.last_report_at, EXCLUDED.last_report_at),
    online = CASE WHEN EXCLUDED.online_at >= s.online_at THEN EXCLUDED.online
                  ELSE s.online END,
    online_at = greatest(s.online_at, EXCLUDED.online_at),
    batch_bytes_received = s.batch_bytes_received + EXCLUDED.batch_bytes_received,
    batch_bytes_json = s.batch_bytes_json + EXCLUDED.batch_bytes_json,
    report = CASE WHEN EXCLUDED.last_report_at IS NULL THEN s.report
                  WHEN s.last_report_at IS NULL OR EXCLUDED.last_report_at >= s.last_report_at
                  THEN coalesce(s.report, '{}'::jsonb) || EXCLUDED.report
                  ELSE EXCLUDED.report || coalesce(s.report, '{}'::jsonb) END
"""


async def _write_devices(conn: Conn, devices: dict[uuid.UUID, _Device]) -> None:
    ids = sorted(devices)
    ds = [devices[i] for i in ids]
    await conn.execute(
        _DEVICES, ids, [_ts(d.seen) for d in ds], [_ts(d.batch) for d in ds],
        [_ts(d.ack) for d in ds], [_ts(d.report) for d in ds], [d.online for d in ds],
        [_ts(d.online_at) for d in ds], [d.figures if d.report is not None else None
                                         for d in ds],
        [d.received for d in ds], [d.json for d in ds])


_LINEAGES = """
INSERT INTO edge_lineage_freshness AS f (lineage_id, last_device_seen_at, last_committed_at,
                                         freshness_seconds)
SELECT u.lineage_id, u.seen, u.committed, u.lag
FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[], $4::float8[])
     AS u(lineage_id, seen, committed, lag)
JOIN edge_table_lineages l ON l.id = u.lineage_id
ORDER BY u.lineage_id
ON CONFLICT (lineage_id) DO UPDATE SET
    -- a batch without the stamp (an upload's chunk, another agent) moves the commit time
    -- only: the device-seen time and lag stay those of the newest stamped batch
    last_device_seen_at = coalesce(EXCLUDED.last_device_seen_at, f.last_device_seen_at),
    last_committed_at = EXCLUDED.last_committed_at,
    freshness_seconds = coalesce(EXCLUDED.freshness_seconds, f.freshness_seconds)
WHERE EXCLUDED.last_committed_at >= f.last_committed_at
"""


async def _write_lineages(conn: Conn,
                          lineages: dict[uuid.UUID, _Lineage]) -> None:
    ids = sorted(lineages)
    ls = [lineages[i] for i in ids]
    await conn.execute(_LINEAGES, ids, [_ts(x.seen) for x in ls], [_ts(x.committed) for x in ls],
                       [x.lag for x in ls])
