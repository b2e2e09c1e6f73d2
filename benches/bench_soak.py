"""The soak: a fleet at a steady rate for an hour through a real broker into a running
``edgesync serve``, while a schema changes and is approved, old telemetry days are dropped,
and PostgreSQL and the broker are each restarted once.

What runs (``fanin_kit``): a **private PostgreSQL cluster** sized as docs/production.md says
(``TunedPostgres``, with autovacuum on — an hour of upserts on a bounded key space needs
it — and ``max_wal_size`` 4 GB so that WAL stays within the disk budget), a **private
Mosquitto** (no persistence), an **``edgesync serve`` subprocess**, and simulated devices
publishing 50-row batches through a few connections (a device always on the same one).
The project coalesces schemas (``project``); a seed device's first batches had the registry
approve both schemas before the fleet starts (``bench_fanin.seed_and_approve``).

* **Open loop**: ``EDGESYNC_SOAK_RATE`` batches/s in all, state and telemetry alternating,
  devices round robin (so they advance in step). A state batch upserts 50 keys of the
  device's fixed range of ``EDGESYNC_SOAK_KEYS`` (cycling): the state table holds at most
  devices x keys rows. Telemetry rows are spaced so that a device's event time covers a day
  in ``EDGESYNC_SOAK_DAY_S`` seconds of the run; a retention job (as an operator's) drops
  the day partitions older than 2 days (``materialize.drop_partitions_before``, under the
  target's DDL lock, with a 2 s ``lock_timeout``).
* **Events** (times printed and marked in the plot): at 35 % of the run the state table
  gains a column (a new ``schema_hash``; the registry review opens and the new batches are
  staged); 30 s later the review is approved (``approve_registry``) and the staged batches
  are replayed; at 55 % PostgreSQL restarts (``pg_ctl restart -m fast``); at 75 % the broker
  restarts. The broker keeps nothing (no persistence): what it held is lost, and each
  publisher connection, once back, **sends again every batch of its devices not yet seen
  committed**, as an agent resends what the cloud did not confirm (the ledger's dedupe by
  ``batch_id`` makes a resend of a committed batch a no-op).
* **Every 10 s**: the worker's ``VmRSS`` and open file descriptors, the cluster's data
  directory (tables, indexes, WAL), batches published and not seen committed, staged
  batches. Growth = the largest value after minute 5 over the value at minute 5 (a quarter
  of the run when it is shorter).
* **Per 5-minute window** (by commit time): batches published and committed, p50/p99/max
  publish → commit. Committed = its ledger row is visible (``fanin_kit.Watcher``'s method:
  the ledger polled by id every 20 ms, holes looked up again; a batch not seen after 15 s is
  looked up by its key). Nothing of a batch is kept once seen: its payload is kept only
  until then (to send it again), its latency only until its window closes.
* **Accounting** at the end, in the database: every batch published has exactly one ledger
  row, materialized or staged and replayed (a batch id carries its device's batch number,
  so per device and table the numbers 0 … n-1 are all there, once: no id is held in
  memory), no staged batch left, the state target holds each device's touched keys once
  with its last commit, and each telemetry day kept holds exactly the rows sent for it.
* **Keeping up**: the most batches waiting (published, not seen committed) in a sample
  before the first event. Over ``BEHIND_S`` seconds of the rate, the report warns that the
  machine cannot take the rate: its windows then time a growing backlog (a slower machine:
  lower ``EDGESYNC_SOAK_RATE``).

Measure (the lead's hour; do not run it on a machine doing other work)::

    pytest benches/bench_soak.py --benchmark-only -s -p no:cacheprovider

Smoke (CI, < 90 s: 10 devices, 40 s, every event compressed into it; asserts only that
every batch and row is accounted for): ``pytest benches/bench_soak.py --benchmark-disable``.

Knobs (environment): ``EDGESYNC_SOAK_S`` (3600), ``EDGESYNC_SOAK_DEVICES`` (1000),
``EDGESYNC_SOAK_RATE`` (batches/s in all, ``DEFAULT_RATE``), ``EDGESYNC_SOAK_KEYS`` (500),
``EDGESYNC_SOAK_DAY_S`` (240), ``EDGESYNC_SOAK_PUBLISHERS`` (4), ``EDGESYNC_SOAK_JSON`` /
``EDGESYNC_SOAK_SVG`` (write the figures / the plot there). Results: docs/benchmarks.md,
"Soak".
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import statistics
import tempfile
import time
import uuid
from array import array
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest
from bench_fanin import ms, pct, seed_and_approve
from bench_ingest import COLUMNS, T0, fields
from fanin_kit import (
    _BATCH_ID,
    _EPOCH,
    _PREFIX,
    HOLE_WAIT,
    STATE_TABLE,
    TELEMETRY_TABLE,
    Broker,
    Device,
    TunedPostgres,
    Worker,
    approve_registry,
    register_fleet,
    run_once,
    scratch_database,
)

import edgesync.fleet
from edgesync import _core, governance
from edgesync.errors import BrokerError
from edgesync.materialize import TsTarget, drop_partitions_before, quote_ident
from edgesync.protocol import Backoff, PublishingClient
from edgesync.store import TRANSIENT_ERRORS, create_pool, migrate

ROWS = 50
# Batches/s in all (half state, half telemetry) when EDGESYNC_SOAK_RATE is unset: see
# docs/benchmarks.md, "Soak", for why this figure.
DEFAULT_RATE = 1000.0
# The column the state table gains mid-run.
NEW_COLUMN = ("site", "TEXT", 0, False)
STATE_V1 = _core.schema_fingerprint(STATE_TABLE, COLUMNS)
STATE_V2 = _core.schema_fingerprint(STATE_TABLE, [*COLUMNS, NEW_COLUMN])
TELE = _core.schema_fingerprint(TELEMETRY_TABLE, COLUMNS)
# The soak's cluster: TUNED_SETTINGS, with autovacuum (an hour of updates of the same keys
# and a ledger that grows: nothing else would vacuum them) and WAL bounded so that the
# data directory stays within the disk budget (20 GB) between checkpoints.
SOAK_SETTINGS = {"autovacuum": "on", "max_wal_size": "4GB"}
# A database call failing because PostgreSQL restarts (the bench's calls ride it out).
DOWN = (*TRANSIENT_ERRORS, asyncpg.InterfaceError)
# The last 12 hex digits of a batch id: its kind (state 1, telemetry 2) and its number
# among the device's batches of that kind (``batch_id``); SQL reads the number back.
_NUMBER_BITS = 44
_NUMBER_SQL = (f"(('x' || right(batch_id::text, 12))::bit(48)::bigint "
               f"& {(1 << _NUMBER_BITS) - 1})")
STATE_KIND, TELE_KIND = 1, 2


# ------------------------------------------------------------------ configuration

def _knob(name: str, default: float, *, low: float, whole: bool = False) -> float:
    """A number from the environment, or a one-line error naming the variable and the fix."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw) if whole else float(raw)
    except ValueError:
        kind = "a whole number" if whole else "a number"
        raise ValueError(f"{name}={raw!r} is not {kind}: set it to e.g. {default:g}, or unset "
                         "it for the default") from None
    if value < low:
        raise ValueError(f"{name}={raw!r} is too small: it must be at least {low:g} "
                         f"(default {default:g})")
    return value


@dataclass(frozen=True)
class Config:
    seconds: float
    devices: int
    rate: float  # batches/s in all, half state and half telemetry
    keys: int  # state keys per device
    day_s: float  # seconds of the run in which a device's telemetry covers a day
    publishers: int
    window_s: float  # latency windows
    sample_s: float  # RSS / fd / disk samples
    baseline_s: float  # the growth check's reference point
    retention_s: float  # how often the retention job runs
    staging_s: float  # from the schema change to the approval
    schema_at: float
    pg_restart_at: float
    broker_restart_at: float
    drain_s: float
    confirm_s: float  # a batch unconfirmed this long is sent again (the agent's default)
    keep_days: int = 2
    smoke: bool = False

    @classmethod
    def from_env(cls, smoke: bool) -> Config:
        if smoke:
            return cls(seconds=40, devices=10, rate=40, keys=100, day_s=8, publishers=2,
                       window_s=10, sample_s=2, baseline_s=10, retention_s=3, staging_s=6,
                       schema_at=6, pg_restart_at=20, broker_restart_at=28, drain_s=30,
                       confirm_s=5, smoke=True)
        seconds = _knob("EDGESYNC_SOAK_S", 3600, low=30)
        keys = int(_knob("EDGESYNC_SOAK_KEYS", 500, low=ROWS, whole=True))
        return cls(seconds=seconds,
                   devices=int(_knob("EDGESYNC_SOAK_DEVICES", 1000, low=1, whole=True)),
                   rate=_knob("EDGESYNC_SOAK_RATE", DEFAULT_RATE, low=2), keys=keys,
                   day_s=_knob("EDGESYNC_SOAK_DAY_S", 240, low=1),
                   publishers=int(_knob("EDGESYNC_SOAK_PUBLISHERS", 4, low=1, whole=True)),
                   window_s=min(300.0, seconds / 4), sample_s=10,
                   baseline_s=min(300.0, seconds / 4), retention_s=min(60.0, seconds / 20),
                   staging_s=30, schema_at=0.35 * seconds, pg_restart_at=0.55 * seconds,
                   broker_restart_at=0.75 * seconds, drain_s=180, confirm_s=60)

    @property
    def spacing_ms(self) -> int:
        """Event time between two telemetry rows of a device: a day in ``day_s``."""
        rows_per_s = self.rate / 2 * ROWS / self.devices  # a device's rows per second
        return max(1, round(86_400_000 / (self.day_s * rows_per_s)))


# ------------------------------------------------------------------ the fleet's batches

def batch_id(kind: int, number: int) -> str:
    """A UUIDv7 whose last 48 bits are ``kind`` and ``number`` (the device's batch number
    of that kind): the accounting checks the numbers in SQL, holding no id in memory."""
    now_ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(4), "big")
    value = ((now_ms << 80) | (0x7 << 76) | ((rand >> 20) & 0xFFF) << 64 | (0b10 << 62)
             | ((rand & 0x3FFF) << 48) | (kind << _NUMBER_BITS) | number)
    return str(uuid.UUID(int=value))


@dataclass(slots=True)
class Pending:
    """A batch published and not yet seen committed: what it takes to send it again."""

    published: float  # monotonic, first published
    sent: float  # monotonic, last published (a resend is due ``confirm_s`` after)
    slot: int  # its publisher connection
    device: uuid.UUID
    topic: str
    payload: bytes


class SoakFleet:
    """The simulated devices' batches. Devices advance in step (round robin), so a payload
    is rendered once per shape and copied with its batch id, journal epoch and row-id
    prefix filled in (``fanin_kit``'s placeholders)."""

    def __init__(self, devices: list[Device], cfg: Config) -> None:
        self.devices, self.cfg = devices, cfg
        self.spacing_ms = cfg.spacing_ms
        self.new_schema = False  # the state table has gained NEW_COLUMN
        self._new_from: dict[uuid.UUID, int] = {}  # a device's first batch of it
        self._templates: dict[tuple[Any, ...], tuple[bytes, Counter[date]]] = {}
        self.tele_rows_by_day: Counter[date] = Counter()
        self.newest_day = T0.date()

    def _template(self, key: tuple[Any, ...], render: Callable[[], tuple[Any, Counter[date]]]
                  ) -> tuple[bytes, Counter[date]]:
        found = self._templates.get(key)
        if found is None:
            if len(self._templates) > 64:  # devices advance in step: few shapes are live
                self._templates.clear()
            doc, days = render()
            found = self._templates[key] = (orjson.dumps(doc), days)
        return found

    def state(self, d: Device) -> tuple[str, str, bytes]:
        """Batch k of a device: commit_seqs k·50+1 …, keys (k·50 + i) mod keys (an update
        once the key was written). A device's first batch of a schema carries its
        ``schema_columns``, as an agent sends them."""
        k = d.state_batches
        d.state_batches += 1
        first_seq = k * ROWS + 1
        d.commit_seq = first_seq + ROWS - 1
        new = self.new_schema
        carries = (self._new_from.setdefault(d.id, k) == k) if new else k == 0
        keys = self.cfg.keys
        schema_hash, canonical = STATE_V2 if new else STATE_V1

        def render() -> tuple[Any, Counter[date]]:
            ops = []
            for i in range(ROWS):
                n = k * ROWS + i
                row = fields(n % keys) | {"seq": first_seq + i}
                if new:
                    row["site"] = f"site-{n % keys % 7}"
                ops.append({"commit_seq": first_seq + i, "op": "update" if n >= keys else "insert",
                            "pk": {"id": n % keys}, "row": row})
            extra = {"schema_columns": orjson.loads(canonical)} if carries else {}
            return ({"format_version": 1, "capture_strategy": "sqlite_row_batch_v1",
                     "batch_id": _BATCH_ID, "journal_epoch": _EPOCH,
                     "source_table": STATE_TABLE, "schema_hash": schema_hash, **extra,
                     "first_commit_seq": first_seq, "last_commit_seq": d.commit_seq,
                     "rows": ops}, Counter())

        template, _ = self._template(("state", new, carries, k), render)
        bid = batch_id(STATE_KIND, k)
        payload = template.replace(_BATCH_ID.encode(), bid.encode()).replace(
            _EPOCH.encode(), d.epoch.encode())
        return f"{d.root}/sync/rows/batch", bid, payload

    def _stamp(self, n: int) -> tuple[str, date]:
        t = T0 + timedelta(milliseconds=n * self.spacing_ms)
        return f"{t:%Y-%m-%dT%H:%M:%S}.{t.microsecond // 1000:03d}Z", t.date()

    def telemetry(self, d: Device) -> tuple[str, str, bytes]:
        """Batch k (batch_seq k+1) of a device: rows k·50 … spaced ``spacing_ms`` from T0;
        row ids are the device's UUID prefix and the row number."""
        k = d.batch_seq
        d.batch_seq += 1
        start = k * ROWS

        def render() -> tuple[Any, Counter[date]]:
            stamps = [self._stamp(start + i) for i in range(ROWS)]
            extra = {"schema_columns": orjson.loads(TELE[1])} if k == 0 else {}
            return ({"format_version": 1, "capture_strategy": "sqlite_telemetry_batch_v1",
                     "batch_id": _BATCH_ID, "batch_seq": k + 1, "source_table": TELEMETRY_TABLE,
                     "schema_hash": TELE[0], **extra, "cursor_start_ts": stamps[0][0],
                     "cursor_end_ts": stamps[-1][0], "row_count": ROWS,
                     "rows": [{"ts": ts, "row_id": f"{_PREFIX}{start + i:012x}",
                               "fields": fields(start + i)}
                              for i, (ts, _) in enumerate(stamps)]},
                    Counter(day for _, day in stamps))

        template, days = self._template(("tele", k), render)
        self.tele_rows_by_day.update(days)
        self.newest_day = max(self.newest_day, max(days))
        bid = batch_id(TELE_KIND, k)
        payload = template.replace(_BATCH_ID.encode(), bid.encode()).replace(
            _PREFIX.encode(), d.row_prefix.encode())
        return f"{d.root}/sync/telemetry/batch", bid, payload


# ------------------------------------------------------------------ publishing

class Uplink:
    """The fleet's publisher connections, resending as agents do. A lost connection is
    connected again with backoff; meanwhile its devices' batches wait in ``pending``, and
    once it is back every batch of its devices not yet seen committed is published again,
    in the order first published. And a batch not seen committed ``confirm_s`` after it
    was last sent is sent again (the agent's ``confirm_timeout``): a broker without
    persistence that restarts drops what it held, and what devices publish before the
    worker's subscription is back."""

    def __init__(self, port: int, count: int, pending: dict[str, Pending], confirm_s: float,
                 log: Callable[[str], None]) -> None:
        self.port, self.pending, self.confirm_s, self.log = port, pending, confirm_s, log
        self.clients: list[PublishingClient | None] = [None] * count
        self.tasks: set[asyncio.Task[None]] = set()
        self.resent = 0
        self.failed_publishes = 0
        self.reconnects = 0

    def slot(self, device_index: int) -> int:
        return device_index % len(self.clients)

    async def _connect(self, slot: int) -> PublishingClient:
        client = PublishingClient("127.0.0.1", self.port,
                                  client_id=f"soak-sim-{slot}-{uuid.uuid4().hex[:6]}")
        await client.__aenter__()
        return client

    async def open(self) -> None:
        for slot in range(len(self.clients)):
            self.clients[slot] = await self._connect(slot)

    async def close(self) -> None:
        await asyncio.gather(*list(self.tasks), return_exceptions=True)
        for client in self.clients:
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.__aexit__(None, None, None)

    def send(self, slot: int, messages: list[tuple[str, bytes]]) -> None:
        """Publish in call order on the slot's connection; nothing while it is down (the
        batches wait in ``pending`` for the reconnect)."""
        client = self.clients[slot]
        if client is None:
            return
        # Tasks start in creation order, so a connection takes its batches in order.
        task = asyncio.create_task(self._publish(slot, client, messages))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _publish(self, slot: int, client: PublishingClient,
                       messages: list[tuple[str, bytes]]) -> None:
        try:
            await client.publish_all(messages)
        except (BrokerError, OSError):
            self.failed_publishes += len(messages)
            if self.clients[slot] is client:  # the first failure of this connection
                self.clients[slot] = None
                task = asyncio.create_task(self._reconnect(slot, client))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)

    async def _reconnect(self, slot: int, lost: PublishingClient) -> None:
        with contextlib.suppress(Exception):
            await lost.__aexit__(None, None, None)
        backoff = Backoff(base=0.2, cap=2.0)
        while True:
            try:
                client = await self._connect(slot)
                break
            except (BrokerError, OSError):
                await asyncio.sleep(backoff.next_delay())
        self.reconnects += 1
        self.clients[slot] = client
        again = self._again(slot, float("inf"))
        self.log(f"publisher {slot} connected again: {again} batches not seen committed "
                 "sent again")

    def _again(self, slot: int, sent_before: float) -> int:
        """Publish again the slot's batches not seen and last sent before ``sent_before``
        (monotonic), in the order first published; how many."""
        now = time.monotonic()
        again = []
        for p in self.pending.values():
            if p.slot == slot and p.sent < sent_before:
                p.sent = now
                again.append((p.topic, p.payload))
        self.resent += len(again)
        if again:
            self.send(slot, again)
        return len(again)

    async def resend_unconfirmed(self) -> None:
        """Every second: the batches unconfirmed ``confirm_s`` after they were last sent."""
        while True:
            await asyncio.sleep(min(1.0, self.confirm_s / 4))
            cut = time.monotonic() - self.confirm_s
            for slot, client in enumerate(self.clients):
                if client is not None:  # a connection down resends all once it is back
                    self._again(slot, cut)


# ------------------------------------------------------------------ seeing commits

class Windows:
    """Per window of ``width`` seconds (by commit time): batches published, committed, and
    the latencies of those committed, summarized (and dropped) when the window closes."""

    def __init__(self, t0: float, width: float) -> None:
        self.t0, self.width = t0, width
        self.index = 0
        self.published = 0
        self.latencies = array("d")
        self.closed: list[dict[str, Any]] = []

    def _roll(self, now: float) -> None:
        while now >= self.t0 + (self.index + 1) * self.width:
            self.close()

    def close(self, now: float | None = None) -> None:
        lat = sorted(self.latencies)
        end = (self.index + 1) * self.width if now is None else now - self.t0
        self.closed.append({
            "start_s": round(self.index * self.width, 1), "end_s": round(end, 1),
            "published": self.published, "committed": len(lat),
            "p50_ms": round(ms(pct(lat, 0.5)), 1) if lat else None,
            "p99_ms": round(ms(pct(lat, 0.99)), 1) if lat else None,
            "max_ms": round(ms(lat[-1]), 1) if lat else None})
        self.index += 1
        self.published = 0
        self.latencies = array("d")

    def publish(self, now: float) -> None:
        self._roll(now)
        self.published += 1

    def commit(self, now: float, latency: float) -> None:
        self._roll(now)
        self.latencies.append(latency)


class LedgerTail:
    """``fanin_kit.Watcher``'s polling of the ledger, keeping nothing of a batch once seen:
    its pending entry goes, its latency goes to its window. Rides out PostgreSQL's restart
    (connects again)."""

    def __init__(self, url: str, pending: dict[str, Pending], windows: Windows) -> None:
        self.url, self.pending, self.windows = url, pending, windows
        self.conn: asyncpg.Connection | None = None
        self.top = 0
        self._holes: dict[int, float] = {}
        self.outcomes: Counter[str] = Counter()
        self.swept = 0
        self.reconnects = 0
        self._lock = asyncio.Lock()

    async def _connected(self) -> asyncpg.Connection:
        if self.conn is None or self.conn.is_closed():
            # Index scans only (see bench_fanin: without statistics ``id > $1`` may be
            # planned as a scan of the whole ledger).
            self.conn = await asyncpg.connect(self.url, server_settings={"enable_seqscan": "off"})
        return self.conn

    async def start(self) -> None:
        conn = await self._connected()
        self.top = await conn.fetchval("SELECT coalesce(max(id), 0) FROM edge_export_segments")

    def _seen(self, bid: str, outcome: str, now: float) -> bool:
        p = self.pending.pop(bid, None)
        if p is None:
            return False
        self.outcomes[outcome] += 1
        self.windows.commit(now, now - p.published)
        return True

    async def poll(self) -> None:
        async with self._lock:
            conn = await self._connected()
            rows = await conn.fetch(
                "SELECT id, batch_id::text, outcome FROM edge_export_segments WHERE id > $1 "
                "UNION ALL SELECT id, batch_id::text, outcome FROM edge_export_segments "
                "WHERE id = ANY($2::bigint[]) AND id <= $1 ORDER BY id", self.top,
                list(self._holes))
        now = time.monotonic()
        for r in rows:
            self._holes.pop(r["id"], None)
            if r["id"] > self.top:
                self._holes.update(dict.fromkeys(range(self.top + 1, r["id"]), now))
                self.top = r["id"]
            self._seen(r["batch_id"], r["outcome"], now)
        for hole in [h for h, since in self._holes.items() if now - since > HOLE_WAIT]:
            del self._holes[hole]

    async def sweep(self, older_than: float) -> None:
        """Look up by key the batches published more than ``older_than`` s ago and not seen
        (committed after their hole was given up, or seen by no poll)."""
        cut = time.monotonic() - older_than
        waiting = [(p.device, uuid.UUID(b)) for b, p in self.pending.items()
                   if p.published < cut][:5000]
        if not waiting:
            return
        async with self._lock:
            conn = await self._connected()
            rows = await conn.fetch(
                "SELECT s.batch_id::text, s.outcome FROM edge_export_segments s "
                "JOIN unnest($1::uuid[], $2::uuid[]) AS k(d, b) "
                "ON s.device_id = k.d AND s.batch_id = k.b WHERE s.outcome <> 'rejected'",
                [d for d, _ in waiting], [b for _, b in waiting])
        now = time.monotonic()
        for r in rows:
            self.swept += self._seen(r["batch_id"], r["outcome"], now)

    async def run(self, interval: float = 0.02) -> None:
        last_sweep = time.monotonic()
        backoff = Backoff(base=0.1, cap=1.0)
        while True:
            try:
                await self.poll()
                if time.monotonic() - last_sweep > 5.0:
                    last_sweep = time.monotonic()
                    await self.sweep(HOLE_WAIT + 5.0)
                backoff.reset()
                await asyncio.sleep(interval)
            except DOWN:
                self.reconnects += 1
                if self.conn is not None:
                    self.conn.terminate()
                    self.conn = None
                await asyncio.sleep(backoff.next_delay())

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()


# ------------------------------------------------------------------ one run

@dataclass
class Soak:
    """One run: the servers, the fleet, and what the background tasks record."""

    cfg: Config
    pg: TunedPostgres
    url: str  # the soak's database
    broker: Broker
    worker: Worker
    pool: asyncpg.Pool
    project_id: uuid.UUID
    targets: dict[str, str]
    fleet: SoakFleet
    log: Callable[[str], None]
    t0: float = 0.0
    pending: dict[str, Pending] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    retention: dict[str, Any] = field(default_factory=lambda: {
        "passes": 0, "dropped": [], "lock_timeouts": 0, "max_s": 0.0, "cutoff": None})

    def event(self, name: str, **extra: Any) -> None:
        at = round(time.monotonic() - self.t0, 1)
        self.events.append({"t_s": at, "event": name, **extra})
        self.log(f"t={at:7.1f}s  {name} {extra or ''}".rstrip())

    async def _sleep_until(self, t: float) -> None:
        await asyncio.sleep(max(0.0, self.t0 + t - time.monotonic()))

    async def staged(self) -> int | None:
        with contextlib.suppress(*DOWN):
            return int(await self.pool.fetchval("SELECT count(*) FROM edge_staged_rows"))
        return None

    async def until_replayed(self, deadline: float) -> None:
        """Until no staged batch is left (replayed), or the monotonic ``deadline``."""
        while time.monotonic() < deadline:
            if await self.staged() == 0:
                return
            await asyncio.sleep(0.5)

    # --- the events ------------------------------------------------------------------

    async def schema_change(self) -> None:
        cfg = self.cfg
        await self._sleep_until(cfg.schema_at)
        self.fleet.new_schema = True
        self.event("schema change", column=NEW_COLUMN[0])
        opened = False
        while time.monotonic() - self.t0 < cfg.schema_at + cfg.staging_s:
            if not opened:
                with contextlib.suppress(*DOWN):
                    async with self.pool.acquire() as conn:
                        opened = bool(await governance.list_registry_reviews(
                            conn, self.project_id, status="queued"))
                if opened:
                    self.event("registry review opened")
            await asyncio.sleep(0.2)
        approved = 0
        while not approved:  # the review may not be queued yet on a slow machine
            with contextlib.suppress(*DOWN):
                approved = await approve_registry(self.pool, self.project_id)
            if not approved:
                await asyncio.sleep(0.5)
        self.event("approval", staged_batches=await self.staged())
        await self.until_replayed(float("inf"))
        self.event("staged batches replayed")

    async def pg_restart(self) -> None:
        await self._sleep_until(self.cfg.pg_restart_at)
        self.event("PostgreSQL restart")
        started = time.monotonic()
        await asyncio.to_thread(self.pg.restart)
        self.event("PostgreSQL back", took_s=round(time.monotonic() - started, 1))

    async def broker_restart(self) -> None:
        await self._sleep_until(self.cfg.broker_restart_at)
        self.event("broker restart")
        started = time.monotonic()
        await self.broker.restart()
        self.event("broker back", took_s=round(time.monotonic() - started, 1))

    # --- the operator's retention job ------------------------------------------------

    async def retain(self) -> None:
        """Every ``retention_s``: drop the telemetry days older than ``keep_days`` before
        the newest day sent (a short lock_timeout: writers never queue long behind it)."""
        table = self.targets[TELEMETRY_TABLE]
        while True:
            await asyncio.sleep(self.cfg.retention_s)
            cutoff = self.fleet.newest_day - timedelta(days=self.cfg.keep_days)
            started = time.monotonic()
            try:
                async with self.pool.acquire() as conn, conn.transaction():
                    await conn.execute("SET LOCAL lock_timeout = '2s'")
                    dropped = await drop_partitions_before(conn, table, cutoff)
            except asyncpg.LockNotAvailableError:
                self.retention["lock_timeouts"] += 1
                continue
            except DOWN:
                continue
            took = time.monotonic() - started
            self.retention["passes"] += 1
            self.retention["cutoff"] = cutoff.isoformat()
            self.retention["max_s"] = max(self.retention["max_s"], round(took, 3))
            self.retention["dropped"] += [n.rsplit("_", 1)[1] for n in dropped]

    # --- samples ---------------------------------------------------------------------

    async def sample(self) -> None:
        while True:
            proc = self.worker.proc
            row: dict[str, Any] = {"t_s": round(time.monotonic() - self.t0, 1)}
            if proc is not None and proc.poll() is None:
                with contextlib.suppress(OSError):
                    row |= {"rss_mb": round(self.worker.rss_bytes() / 2**20, 1),
                            "fds": self.worker.open_fds()}
            row["data_gb"] = round(await asyncio.to_thread(self.pg.data_bytes) / 2**30, 3)
            row["not_seen"] = len(self.pending)
            row["staged"] = await self.staged()
            row["bench_rss_mb"] = round(_own_rss() / 2**20, 1)
            self.samples.append(row)
            await asyncio.sleep(self.cfg.sample_s)

    # --- the fleet ---------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        cfg, fleet, pending = self.cfg, self.fleet, self.pending
        uplink = Uplink(self.broker.port, cfg.publishers, pending, cfg.confirm_s, self.log)
        await uplink.open()
        self.t0 = time.monotonic()
        windows = Windows(self.t0, cfg.window_s)
        tail = LedgerTail(self.url, pending, windows)
        await tail.start()
        background = [asyncio.create_task(c) for c in (
            tail.run(), self.sample(), self.retain(), uplink.resend_unconfirmed(),
            self.schema_change(), self.pg_restart(), self.broker_restart())]
        gc.freeze()  # the setup's objects out of the collector's sight (see bench_fanin)
        devices = fleet.devices
        n, late = 0, 0.0
        end = self.t0 + cfg.seconds
        try:
            while (due := self.t0 + n / cfg.rate) < end:
                now = time.monotonic()
                if due > now:
                    await asyncio.sleep(due - now)
                else:
                    late = max(late, now - due)
                index = (n // 2) % len(devices)
                d = devices[index]
                topic, bid, payload = fleet.state(d) if n % 2 == 0 else fleet.telemetry(d)
                now = time.monotonic()
                slot = uplink.slot(index)
                pending[bid] = Pending(now, now, slot, d.id, topic, payload)
                windows.publish(now)
                uplink.send(slot, [(topic, payload)])
                n += 1
            self.log(f"published {n} batches in {time.monotonic() - self.t0:.0f}s; draining "
                     f"{len(pending)}")
            deadline = time.monotonic() + cfg.drain_s
            while pending and time.monotonic() < deadline:
                await asyncio.sleep(0.5)
                with contextlib.suppress(*DOWN):
                    await tail.sweep(3.0)
            for task in background[4:]:  # the events end before the drain does
                if not task.done():
                    self.log("an event had not finished by the end of the drain")
            await self.until_replayed(deadline)
            windows.close(time.monotonic())
        finally:
            gc.unfreeze()
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await uplink.close()
            await tail.close()
        wall = time.monotonic() - self.t0
        return {"published": n, "wall_s": round(wall, 1), "pacer_max_late_s": round(late, 3),
                "not_seen": len(pending), "outcomes_seen": dict(tail.outcomes),
                "watcher_swept": tail.swept, "watcher_reconnects": tail.reconnects,
                "resent": uplink.resent, "failed_publishes": uplink.failed_publishes,
                "publisher_reconnects": uplink.reconnects, "windows": windows.closed}

    # --- the accounting --------------------------------------------------------------

    async def account(self) -> dict[str, Any]:
        """Every batch once in the ledger, nothing staged left, state and telemetry rows
        as sent (module docstring)."""
        fleet, cfg = self.fleet, self.cfg
        ids = [d.id for d in fleet.devices]
        sent = {(d.id, STATE_TABLE): d.state_batches for d in fleet.devices} | {
            (d.id, TELEMETRY_TABLE): d.batch_seq for d in fleet.devices}
        rows = await self.pool.fetch(
            f"SELECT device_id, source_table, count(*) AS n, count(DISTINCT batch_id) AS ids, "
            f"count(DISTINCT {_NUMBER_SQL}) AS numbers, min({_NUMBER_SQL}) AS lo, "
            f"max({_NUMBER_SQL}) AS hi, "
            "count(*) FILTER (WHERE outcome = 'materialized') AS materialized, "
            "count(*) FILTER (WHERE outcome = 'staged') AS staged, "
            "count(*) FILTER (WHERE outcome = 'rejected') AS rejected "
            "FROM edge_export_segments WHERE device_id = ANY($1::uuid[]) GROUP BY 1, 2", ids)
        got = {(r["device_id"], r["source_table"]): r for r in rows}
        out: Counter[str] = Counter()
        for key, count in sent.items():
            r = got.pop(key, None)
            out["batches_sent"] += count
            if r is None:
                out["lost"] += count
                continue
            out["ledger_rows"] += r["n"]
            out["materialized"] += r["materialized"]
            out["staged_then_replayed"] += r["staged"]
            out["rejected"] += r["rejected"]
            out["doubled"] += r["n"] - r["ids"]  # the same batch twice
            out["lost"] += max(0, count - r["numbers"])
            # Two ids with one number, or a number past the last sent: never sent.
            out["unknown"] += r["ids"] - r["numbers"] + (r["hi"] >= count)
        out["unknown"] += sum(r["n"] for r in got.values())
        out["staged_left"] = await self.pool.fetchval("SELECT count(*) FROM edge_staged_rows")

        state = quote_ident(self.targets[STATE_TABLE])
        srows = await self.pool.fetch(
            f"SELECT device_id, count(*) AS n, max(_edge_commit_seq) AS last, "
            f"count({quote_ident(NEW_COLUMN[0])}) AS new_column "
            f"FROM {state} WHERE device_id = ANY($1::uuid[]) GROUP BY 1", ids)
        by_device = {r["device_id"]: r for r in srows}
        for d in fleet.devices:
            expected = min(cfg.keys, d.state_batches * ROWS)
            r = by_device.get(d.id)
            out["state_rows_expected"] += expected
            out["state_rows"] += r["n"] if r else 0
            out["state_devices_last_commit_wrong"] += bool(
                d.state_batches and (r is None or r["last"] != d.commit_seq))
            out["state_rows_with_new_column"] += r["new_column"] if r else 0

        tele = self.targets[TELEMETRY_TABLE]
        cutoff = date.fromisoformat(self.retention["cutoff"]) if self.retention["cutoff"] \
            else T0.date()
        lo = T0 + timedelta(days=(cutoff - T0.date()).days)
        trows = await self.pool.fetch(
            f"SELECT (event_ts AT TIME ZONE 'UTC')::date AS day, count(*) AS n, "
            f"count(DISTINCT (device_id, row_id)) AS distinct_rows FROM {quote_ident(tele)} "
            "WHERE device_id = ANY($1::uuid[]) AND event_ts >= $2 GROUP BY 1", ids, lo)
        days = {r["day"]: r for r in trows}
        mismatched = []
        for day, count in sorted(fleet.tele_rows_by_day.items()):
            if day < cutoff:
                continue
            r = days.pop(day, None)
            out["telemetry_rows_expected"] += count
            out["telemetry_rows"] += r["n"] if r else 0
            out["telemetry_rows_doubled"] += (r["n"] - r["distinct_rows"]) if r else 0
            if r is None or r["n"] != count:
                mismatched.append(day.isoformat())
        out["telemetry_rows_unexpected_days"] = sum(r["n"] for r in days.values())
        default = quote_ident(TsTarget(tele, []).default_partition)
        out["telemetry_rows_in_default"] = await self.pool.fetchval(
            f"SELECT count(*) FROM {default} WHERE device_id = ANY($1::uuid[])", ids)
        result: dict[str, Any] = dict(out)
        result |= {"telemetry_days_kept": sum(1 for d in fleet.tele_rows_by_day if d >= cutoff),
                   "telemetry_days_sent": len(fleet.tele_rows_by_day),
                   "telemetry_days_mismatched": mismatched}
        return result


def _own_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def growth(samples: list[dict[str, Any]], key: str, baseline_s: float,
           window_s: float) -> dict[str, Any]:
    """How much ``key`` grew after ``baseline_s``, three ways:

    * ``growth_pct``: the largest value after ``baseline_s`` over the one sample at it
      (a peak against a single sample: the strictest);
    * ``level_pct``: the median of the last ``window_s`` over the median of the window
      that starts at ``baseline_s`` (what the process keeps: a level that climbs);
    * ``peak_pct``: the largest value after that first window over the largest in it
      (peaks against peaks: a working set that grows).
    """
    values = [(s["t_s"], s[key]) for s in samples if s.get(key) is not None]
    after = [(t, v) for t, v in values if t >= baseline_s]
    if not after:
        return {"at_baseline": None, "max_after": None, "growth_pct": None,
                "level_pct": None, "peak_pct": None}

    def pct(new: float, old: float) -> float | None:
        return round(100.0 * (new - old) / old, 1) if old else None

    base, top = after[0][1], max(v for _, v in after)
    first = [v for t, v in after if t < baseline_s + window_s]
    later = [v for t, v in after if t >= baseline_s + window_s]
    end = after[-1][0]
    last = [v for t, v in after if t > end - window_s]
    out: dict[str, Any] = {"at_baseline": base, "max_after": top, "growth_pct": pct(top, base),
                           "level_pct": None, "peak_pct": None}
    if first and later:
        out |= {"first_window_median": statistics.median(first),
                "last_window_median": statistics.median(last),
                "level_pct": pct(statistics.median(last), statistics.median(first)),
                "first_window_max": max(first), "max_later": max(later),
                "peak_pct": pct(max(later), max(first))}
    return out


def by_window(samples: list[dict[str, Any]], key: str, width: float) -> list[dict[str, Any]]:
    """Median and largest ``key`` per ``width``-second window of sample time: a level
    that climbs window after window (something kept) apart from peaks that come and go
    (a replay's or a resend's working set)."""
    windows: dict[int, list[float]] = {}
    for s in samples:
        if s.get(key) is not None:
            windows.setdefault(int(s["t_s"] // width), []).append(s[key])
    return [{"start_s": k * width, "median": statistics.median(v), "max": max(v)}
            for k, v in sorted(windows.items())]


async def run(cfg: Config, log: Callable[[str], None]) -> dict[str, Any]:
    results: dict[str, Any] = {"config": cfg.__dict__ | {"spacing_ms": cfg.spacing_ms}}
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        work = Path(tmp)
        pg = TunedPostgres(work, settings=SOAK_SETTINGS)
        pg.start()
        try:
            async with scratch_database(pg.url, "edgesync_soak") as url:
                results |= await _soak(cfg, work, pg, url, log)
        finally:
            pg.stop()
    return results


async def _soak(cfg: Config, work: Path, pg: TunedPostgres, url: str,
                log: Callable[[str], None]) -> dict[str, Any]:
    broker = Broker(work)
    pool = await create_pool(url, max_size=4)
    worker: Worker | None = None
    try:
        await broker.start()
        async with pool.acquire() as conn:
            await migrate(conn)
            project_id = await edgesync.fleet.ensure_project(conn, "soak", "soak")
            await conn.execute("UPDATE edge_projects SET policy = policy || $2 WHERE id = $1",
                               project_id, {"schema_coalescing_mode": "project"})
            devices = await register_fleet(conn, project_id, "soak", cfg.devices, "dev-")
            (seed,) = await register_fleet(conn, project_id, "soak", 1, "seed-")
        targets = await seed_and_approve(pool, seed)
        worker = Worker(work, url, broker.url)
        await worker.start()
        soak = Soak(cfg, pg, url, broker, worker, pool, project_id, targets,
                    SoakFleet(devices, cfg), log)
        log(f"{cfg.devices} devices, {cfg.rate:g} batches/s for {cfg.seconds:g}s "
            f"(telemetry rows {cfg.spacing_ms} ms apart: a day in {cfg.day_s:g}s)")
        out = await soak.run()
        out |= {"events": soak.events, "samples": soak.samples,
                "retention": soak.retention | {"dropped": len(soak.retention["dropped"])},
                "accounting": await soak.account(),
                "rss_growth": growth(soak.samples, "rss_mb", cfg.baseline_s, cfg.window_s),
                "fds_growth": growth(soak.samples, "fds", cfg.baseline_s, cfg.window_s),
                "rss_windows": by_window(soak.samples, "rss_mb", cfg.window_s),
                "data_gb_max": max((s["data_gb"] for s in soak.samples), default=None)}
        errors = [line for line in worker.log.read_text(errors="replace").splitlines()
                  if " ERROR " in line]
        # The first of them kept: the log goes with the run's temporary directory.
        out |= {"worker_error_lines": len(errors), "worker_errors": errors[:10]}
        return out
    finally:
        if worker is not None:
            worker.stop()
        broker.stop()
        await pool.close()


# ------------------------------------------------------------------ output

_EVENT_COLORS = {"schema change": "#c90", "approval": "#393", "PostgreSQL restart": "#36c",
                 "broker restart": "#939"}


def svg_plot(results: dict[str, Any], title: str) -> str:
    """Three panels over the run's time, no dependency: p99 publish → commit per window,
    the worker's RSS, its open fds; the events as vertical lines."""
    w, left, right, top, panel_h, gap = 640, 64, 20, 34, 120, 34
    panels = [("p99 ms per window", [((x["start_s"] + x["end_s"]) / 2, x["p99_ms"])
                                     for x in results["windows"] if x["p99_ms"] is not None]),
              ("worker RSS MB", [(s["t_s"], s["rss_mb"]) for s in results["samples"]
                                 if "rss_mb" in s]),
              ("worker open fds", [(s["t_s"], s["fds"]) for s in results["samples"]
                                   if "fds" in s])]
    h = top + len(panels) * (panel_h + gap) + 10
    t_end = max(results["wall_s"], 1.0)

    def sx(t: float) -> float:
        return left + t / t_end * (w - left - right)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
             'font-family="sans-serif" font-size="11">',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<text x="{w / 2}" y="18" text-anchor="middle" font-size="13">{title}</text>']
    for n, (label, pts) in enumerate(panels):
        y0 = top + n * (panel_h + gap)
        y1 = y0 + panel_h
        ymax = max((v for _, v in pts), default=1.0) * 1.15 or 1.0

        def sy(v: float, y1: float = y1, ymax: float = ymax) -> float:
            return y1 - v / ymax * panel_h

        parts += [f'<line x1="{left}" y1="{y1}" x2="{w - right}" y2="{y1}" stroke="black"/>',
                  f'<line x1="{left}" y1="{y0}" x2="{left}" y2="{y1}" stroke="black"/>',
                  f'<text x="{left + 6}" y="{y0 + 12}">{label}</text>']
        for i in range(3):
            v = ymax * i / 2
            parts.append(f'<text x="{left - 6}" y="{sy(v) + 4:.1f}" text-anchor="end">'
                         f'{v:.0f}</text>')
        if pts:
            poly = " ".join(f"{sx(t):.1f},{sy(v):.1f}" for t, v in pts)
            parts.append(f'<polyline points="{poly}" fill="none" stroke="#c33" '
                         'stroke-width="1.5"/>')
            if len(pts) <= 30:
                parts += [f'<circle cx="{sx(t):.1f}" cy="{sy(v):.1f}" r="3" fill="#c33"/>'
                          for t, v in pts]
        for e in results["events"]:
            color = _EVENT_COLORS.get(e["event"])
            if color:
                parts.append(f'<line x1="{sx(e["t_s"]):.1f}" y1="{y0}" x2="{sx(e["t_s"]):.1f}" '
                             f'y2="{y1}" stroke="{color}" stroke-dasharray="4,3"/>')
        for i in range(5):
            t = t_end * i / 4
            parts.append(f'<text x="{sx(t):.1f}" y="{y1 + 13}" text-anchor="middle">'
                         f'{t / 60:.1f} min</text>')
    for n, (name, color) in enumerate(_EVENT_COLORS.items()):
        parts.append(f'<text x="{left + 150 + 120 * n}" y="{top - 4}" fill="{color}">'
                     f'┆ {name}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


# Batches waiting, in seconds of the rate, above which the worker did not keep up before
# the first event: the windows then time a growing backlog, not the steady state.
BEHIND_S = 2.0


def steady_backlog(results: dict[str, Any]) -> dict[str, Any]:
    """The most batches published and not yet seen committed in a sample before the
    first event (the schema change), and what that is in seconds of the rate."""
    first = min((e["t_s"] for e in results["events"]), default=results["wall_s"])
    waiting = max((s["not_seen"] for s in results["samples"]
                   if s["t_s"] < first and s.get("not_seen") is not None), default=0)
    seconds = waiting / results["config"]["rate"]
    return {"batches": waiting, "seconds": round(seconds, 2), "keeps_up": seconds <= BEHIND_S}


def report(results: dict[str, Any]) -> str:
    cfg = results["config"]
    lines = ["", f"soak: {cfg['devices']} devices, {cfg['rate']:g} batches/s, "
             f"{results['wall_s']:.0f}s; {results['published']} batches published",
             "events:"]
    lines += [f"  t={e['t_s']:7.1f}s  {e['event']}"
              + "".join(f" {k}={v}" for k, v in e.items() if k not in ("t_s", "event"))
              for e in results["events"]]
    lines.append("window            published  committed   p50 ms   p99 ms   max ms")
    for x in results["windows"]:
        lines.append(f"  {x['start_s']:6.0f}-{x['end_s']:6.0f}s  {x['published']:9}  "
                     f"{x['committed']:9}  {x['p50_ms'] or 0:7.1f}  {x['p99_ms'] or 0:7.1f}  "
                     f"{x['max_ms'] or 0:7.1f}")
    backlog = results["steady_backlog"]
    lines.append(f"steady_backlog: {backlog}")
    if not backlog["keeps_up"]:
        lines.append(f"WARNING: the worker did not keep up with {cfg['rate']:g} batches/s on "
                     f"this machine: {backlog['batches']} batches waited before the first "
                     "event; the windows time a backlog, not the steady state: lower "
                     "EDGESYNC_SOAK_RATE")
    for key in ("rss_growth", "fds_growth"):
        lines.append(f"{key}: {results[key]}")
    lines.append("rss_mb per window (median / max): " + ", ".join(
        f"{w['start_s']:.0f}s {w['median']:.1f}/{w['max']:.1f}" for w in results["rss_windows"]))
    for key in ("data_gb_max", "pacer_max_late_s", "not_seen", "resent", "failed_publishes",
                "publisher_reconnects", "watcher_swept", "watcher_reconnects", "outcomes_seen",
                "worker_error_lines", "worker_errors", "retention"):
        lines.append(f"{key}: {results[key]}")
    lines.append(f"accounting: {results['accounting']}")
    return "\n".join(lines)


@pytest.mark.benchmark(group="soak")
@pytest.mark.timeout(3 * 3600)
def test_soak(benchmark: Any) -> None:
    smoke = bool(benchmark.disabled)
    cfg = Config.from_env(smoke)
    results = run_once(benchmark, "soak", lambda log: run(cfg, log))
    results["steady_backlog"] = steady_backlog(results)
    benchmark.extra_info.update({k: v for k, v in results.items()
                                 if k not in ("config", "samples")})
    print(report(results))
    if path := os.environ.get("EDGESYNC_SOAK_JSON"):
        Path(path).write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    if path := os.environ.get("EDGESYNC_SOAK_SVG"):
        Path(path).write_text(svg_plot(results, f"Soak: {cfg.devices:,} devices, "
                                                f"{cfg.rate:g} batches/s"))
    # Correctness only (never speed): every batch once, every row accounted for.
    acc = results["accounting"]
    assert results["not_seen"] == 0, results["not_seen"]
    assert acc["lost"] == acc["doubled"] == acc["unknown"] == acc["rejected"] == 0, acc
    assert acc["ledger_rows"] == acc["batches_sent"] == results["published"], acc
    assert acc["materialized"] + acc["staged_then_replayed"] == acc["batches_sent"], acc
    assert acc["staged_left"] == 0, acc
    assert acc["state_rows"] == acc["state_rows_expected"], acc
    assert acc["state_devices_last_commit_wrong"] == 0, acc
    assert acc["telemetry_rows"] == acc["telemetry_rows_expected"], acc
    assert acc["telemetry_rows_doubled"] == acc["telemetry_rows_in_default"] == 0, acc
    assert not acc["telemetry_days_mismatched"], acc
    names = [e["event"] for e in results["events"]]
    for needed in ("schema change", "registry review opened", "approval",
                   "staged batches replayed", "PostgreSQL back", "broker back"):
        assert needed in names, (needed, names)
