"""Fleet fan-in: many devices' small batches through a real broker into a running
``edgesync serve``, each figure measured in one run next to one plain COPY of the same
rows into an identical table.

Simulated devices (a few publisher connections, not one per device) publish 50-row
batches of a 10-column table through a private Mosquitto into an ``edgesync serve``
subprocess on a fresh database of the local PostgreSQL; simulator, broker, PostgreSQL and
worker share the machine. The project uses ``schema_coalescing_mode = project`` and its
registry approved both schemas before the fleet starts (a seed device's first batches,
approved in-process), so every device's lineage is approved on arrival. Figures:

* **lineage creation**: the first batch of each new device (first batches/s);
* **per-batch cost at saturation** for 10, 100, 1,000, 10,000 devices (state batches:
  inserts and updates of the previous batch's keys), disjoint device sets, in that order;
  the cost at the headline size (1,000) is also the state rows/s figure;
* **telemetry rows/s** at the headline size;
* **publish → committed latency** at half the measured state maximum (p50/p99);
* **worker RSS** while ``EDGESYNC_FANIN_RSS_MESSAGES`` (100,000) telemetry batches wait in
  the broker: published to the worker's persistent session while it is stopped, then
  sampled from ``/proc/<pid>/status`` while it drains.

Saturation is closed-loop: the simulator keeps at most ``max(8, 2 s x the commit rate of
the last second)`` batches published and not yet committed, so the worker never waits for
work and a capped figure leaves about two seconds of backlog. A rate is the committed
batches over the span between the first and the last commit seen; a figure whose cap
(``EDGESYNC_FANIN_CAP``) ends publishing first reports the rate over that window. A batch is
committed when its ledger row is visible (see ``fanin_kit``, ``Watcher``).

Measure::

    pytest benches/bench_fanin.py --benchmark-only -s -p no:cacheprovider

Smoke (CI; 10 devices, a few batches each; asserts every batch arrived once, nothing
doubled, no speed): ``pytest benches/bench_fanin.py --benchmark-disable``.

Knobs (environment): ``EDGESYNC_FANIN_SCALES`` (``10,100,1000,10000``),
``EDGESYNC_FANIN_DEVICES`` (headline size, 1000; added to the scales),
``EDGESYNC_FANIN_BATCHES`` (steady batches per device, 0 = until the cap),
``EDGESYNC_FANIN_CAP`` (seconds of publishing per figure, 60), ``EDGESYNC_FANIN_WARM_CAP``
(seconds for the first batches of a device set, 900), ``EDGESYNC_FANIN_LATENCY_S`` (30),
``EDGESYNC_FANIN_RSS_MESSAGES`` (100000), ``EDGESYNC_FANIN_RSS_S`` (60),
``EDGESYNC_FANIN_COPY_ROWS`` (50000), ``EDGESYNC_FANIN_PUBLISHERS`` (4),
``EDGESYNC_FANIN_JSON`` / ``EDGESYNC_FANIN_SVG`` (write the figures / the per-batch cost
plot there). Results: docs/benchmarks.md, "Fleet fan-in".
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import io
import os
import signal
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest
from bench_ingest import BASE_DB, COLUMNS, PG_TYPES, clone_table, fields, uuid7
from fanin_kit import (
    STATE_TABLE,
    TELEMETRY_TABLE,
    Batch,
    Broker,
    Device,
    Publishers,
    Tracked,
    TunedPostgres,
    Watcher,
    Worker,
    approve_registry,
    bench_pauses,
    cpu_by_kind,
    cpu_split,
    register_fleet,
    run_once,
    scratch_database,
    state_batch,
    telemetry_batch,
)

import edgesync.fleet
from edgesync import _core
from edgesync.ingest import IngestPipeline, OutcomeStatus, Replayer
from edgesync.materialize import quote_ident
from edgesync.store import create_pool, migrate

ROWS = 50
MIRRORS = [(c[0], PG_TYPES[c[1]]) for c in COLUMNS]
MIN_WINDOW = 8
DRAIN_LIMIT = 180.0


@dataclass(frozen=True)
class Config:
    scales: list[int]
    devices: int
    batches: int  # steady batches per device (0: until the cap)
    cap: float
    warm_cap: float
    latency_s: float
    rss_messages: int
    rss_s: float
    copy_rows: int
    publishers: int
    # "shared": the tests' PostgreSQL as it is configured; "tuned": a private cluster with
    # the settings of docs/production.md (fanin_kit.TUNED_SETTINGS).
    postgres: str = "shared"
    # VACUUM (ANALYZE) and CHECKPOINT before each figure's window (Figures._vacuum).
    vacuum: bool = True
    # Where each window's profiles go (EDGESYNC_FANIN_PROFILE), and its statements
    # (EDGESYNC_FANIN_STATEMENTS: pg_stat_statements, on the tuned cluster only).
    profile_dir: Path | None = None
    statements_dir: Path | None = None
    # Settings of the private cluster in place of TUNED_SETTINGS' (EDGESYNC_FANIN_PG_SET).
    pg_settings: dict[str, str] = field(default_factory=dict)
    # The latency run's rate instead of half the state maximum (EDGESYNC_FANIN_LATENCY_RATE),
    # and where its every batch's (publish s, latency s) go (EDGESYNC_FANIN_LATENCY_DUMP).
    latency_rate: float | None = None
    latency_dump: Path | None = None

    def __post_init__(self) -> None:
        if self.pg_settings and self.postgres != "tuned":
            raise ValueError("EDGESYNC_FANIN_PG_SET needs EDGESYNC_FANIN_PG=tuned (the "
                             "shared server's settings are the machine's)")
        if self.statements_dir is not None and self.postgres != "tuned":
            raise ValueError("EDGESYNC_FANIN_STATEMENTS needs EDGESYNC_FANIN_PG=tuned (the "
                             "shared server does not load pg_stat_statements)")

    @classmethod
    def from_env(cls, smoke: bool) -> Config:
        if smoke:
            return cls(scales=[10], devices=10, batches=3, cap=30, warm_cap=30, latency_s=2,
                       rss_messages=40, rss_s=30, copy_rows=500, publishers=2,
                       postgres="tuned")
        env = os.environ.get
        devices = int(env("EDGESYNC_FANIN_DEVICES", "1000"))
        scales = sorted({int(s) for s in env("EDGESYNC_FANIN_SCALES",
                                             "10,100,1000,10000").split(",")} | {devices})
        return cls(scales=scales, devices=devices, batches=int(env("EDGESYNC_FANIN_BATCHES", "0")),
                   cap=float(env("EDGESYNC_FANIN_CAP", "60")),
                   warm_cap=float(env("EDGESYNC_FANIN_WARM_CAP", "900")),
                   latency_s=float(env("EDGESYNC_FANIN_LATENCY_S", "30")),
                   rss_messages=int(env("EDGESYNC_FANIN_RSS_MESSAGES", "100000")),
                   rss_s=float(env("EDGESYNC_FANIN_RSS_S", "60")),
                   copy_rows=int(env("EDGESYNC_FANIN_COPY_ROWS", "50000")),
                   publishers=int(env("EDGESYNC_FANIN_PUBLISHERS", "4")),
                   postgres=_postgres(env("EDGESYNC_FANIN_PG", "shared")),
                   vacuum=env("EDGESYNC_FANIN_VACUUM", "1") != "0",
                   profile_dir=_directory(env("EDGESYNC_FANIN_PROFILE")),
                   statements_dir=_directory(env("EDGESYNC_FANIN_STATEMENTS")),
                   pg_settings=_settings(env("EDGESYNC_FANIN_PG_SET", "")),
                   latency_rate=float(rate) if (rate := env("EDGESYNC_FANIN_LATENCY_RATE"))
                   else None,
                   latency_dump=Path(dump) if (dump := env("EDGESYNC_FANIN_LATENCY_DUMP"))
                   else None)


def _settings(value: str) -> dict[str, str]:
    """``name=value,name=value`` → a dict; a clear error for anything else."""
    out = {}
    for item in filter(None, (i.strip() for i in value.split(","))):
        name, sep, setting = item.partition("=")
        if not sep or not name.strip() or not setting.strip():
            raise ValueError(f"EDGESYNC_FANIN_PG_SET: {item!r} is not name=value "
                             "(e.g. max_wal_size=1GB,shared_buffers=128MB)")
        out[name.strip()] = setting.strip()
    return out


def _directory(value: str | None) -> Path | None:
    if not value:
        return None
    path = Path(value)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _postgres(value: str) -> str:
    if value not in ("shared", "tuned"):
        raise ValueError(f"EDGESYNC_FANIN_PG must be 'shared' or 'tuned', not {value!r}")
    return value


# ------------------------------------------------------------------ driving the fleet

class Fleet:
    """The simulator side of one run: publishers, the watcher, and every batch sent."""

    def __init__(self, pubs: Publishers, watcher: Watcher) -> None:
        self.pubs, self.watcher = pubs, watcher
        self.sent: list[Batch] = []  # every batch published (for the correctness checks)

    async def _send(self, tracked: Tracked, b: Batch, tasks: set[asyncio.Task[None]],
                    room: asyncio.Semaphore) -> None:
        await room.acquire()
        self.watcher.track(tracked, b.batch_id, b.rows)
        self.sent.append(b)
        # Tasks start in creation order, so each connection gets its batches in order.
        task = asyncio.create_task(self.pubs.publish(b))
        tasks.add(task)
        task.add_done_callback(lambda t: (tasks.discard(t), room.release()))

    async def saturate(self, make: Callable[[Any], Batch], devices: Iterable[Any],
                       cap: float, *, tracked: Tracked | None = None) -> Tracked:
        """Closed loop: publish while fewer than ``window`` batches wait, for at most
        ``cap`` seconds, then wait for the last ones to commit (``tracked``: into the
        caller's, to watch them meanwhile)."""
        tracked = tracked if tracked is not None else Tracked()
        tasks: set[asyncio.Task[None]] = set()
        room = asyncio.Semaphore(512)
        start = time.monotonic()
        marks: list[tuple[float, int]] = [(start, 0)]
        window = MIN_WINDOW
        for d in devices:
            while tracked.outstanding >= window and time.monotonic() - start <= cap:
                tracked.changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(tracked.changed.wait(), 0.05)
                now = time.monotonic()
                if now - marks[-1][0] >= 0.25:
                    marks.append((now, len(tracked.seen)))
                    del marks[:-8]
                    old = next(m for m in marks if m[0] >= now - 1.0)
                    if now > old[0]:
                        rate = (len(tracked.seen) - old[1]) / (now - old[0])
                        window = max(MIN_WINDOW, int(2.0 * rate))
            if time.monotonic() - start > cap:
                break
            await self._send(tracked, make(d), tasks, room)
        await asyncio.gather(*list(tasks))
        await self.drain(tracked)
        return tracked

    async def paced(self, make: Callable[[Device], Batch], devices: Iterator[Device],
                    rate: float, seconds: float) -> Tracked:
        """Open loop at ``rate`` batches/s for ``seconds``."""
        tracked = Tracked()
        tasks: set[asyncio.Task[None]] = set()
        room = asyncio.Semaphore(512)
        start = time.monotonic()
        n = 0
        while (due := start + n / rate) < start + seconds:
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            await self._send(tracked, make(next(devices)), tasks, room)
            n += 1
        await asyncio.gather(*list(tasks))
        await self.drain(tracked)
        return tracked

    async def flood(self, make: Callable[[Device], Batch], devices: Iterator[Device],
                    count: int) -> Tracked:
        """``count`` batches as fast as the publishers take them."""
        tracked = Tracked()
        tasks: set[asyncio.Task[None]] = set()
        room = asyncio.Semaphore(512)
        for _ in range(count):
            await self._send(tracked, make(next(devices)), tasks, room)
        await asyncio.gather(*list(tasks))
        return tracked

    async def drain(self, tracked: Tracked, limit: float = DRAIN_LIMIT) -> None:
        """Wait for the tracked batches to commit; after 3 s without progress, look the
        missing ones up by batch_id."""
        deadline = time.monotonic() + limit
        progress = time.monotonic()
        while tracked.outstanding and time.monotonic() < deadline:
            tracked.changed.clear()
            try:
                await asyncio.wait_for(tracked.changed.wait(), 0.05)
                progress = time.monotonic()
            except TimeoutError:
                if time.monotonic() - progress > 3.0:
                    await self.watcher.sweep(tracked)
                    progress = time.monotonic()


def cycle(devices: list[Device], rounds: int) -> Iterator[Device]:
    n = 0
    while not rounds or n < rounds:
        yield from devices
        n += 1


def not_materialized(tracked: Tracked) -> dict[str, int]:
    out: dict[str, int] = {}
    for outcome in tracked.outcomes.values():
        if outcome != "materialized":
            out[outcome] = out.get(outcome, 0) + 1
    if tracked.outstanding:
        out["not_seen"] = tracked.outstanding
    return out


# ------------------------------------------------------------------ the references

async def copy_reference(conn: asyncpg.Connection, target: str, kind: str,
                         devices: list[Device], rows: int) -> float:
    """Rows/s of ONE plain COPY (text) of ``rows`` rows of the same shape — the same
    devices, columns and values — into an identical table (a clone of the target with its
    keys, indexes, partitions). State rows are inserts of fresh keys (a plain COPY cannot
    update), telemetry rows the devices' first batches again."""
    clone = f"fanin_copy_{kind}"
    schema_hash, canonical = _core.schema_fingerprint(STATE_TABLE, COLUMNS)
    await clone_table(conn, target, clone)
    buf = io.BytesIO()
    n, k = 0, 0
    while n < rows:
        d = devices[k % len(devices)]
        if kind == "state":
            seq0 = 10_000_000 + k * ROWS
            doc = {"format_version": 1, "capture_strategy": "sqlite_row_batch_v1",
                   "batch_id": uuid7(), "journal_epoch": d.epoch, "source_table": STATE_TABLE,
                   "schema_hash": schema_hash, "schema_columns": orjson.loads(canonical),
                   "first_commit_seq": seq0 + 1, "last_commit_seq": seq0 + ROWS,
                   "rows": [{"commit_seq": seq0 + i + 1, "op": "insert",
                             "pk": {"id": seq0 + i}, "row": fields(seq0 + i)}
                            for i in range(ROWS)]}
            prefix = f"{d.id}\t".encode()
            text = _core.decode_row_batch(orjson.dumps(doc)).encode_state_copy(MIRRORS)
            buf.write(b"".join(prefix + line + b"\n" for line in text.splitlines()))
        else:
            ghost = Device(d.id, d.name, d.slug, batch_seq=k // len(devices))
            b = telemetry_batch(ghost, ROWS)
            buf.write(_core.decode_telemetry_batch(b.payload).encode_telemetry_copy(
                MIRRORS, device_id=str(d.id)))
        n += ROWS
        k += 1
    if kind == "state":
        cols = ["device_id", "_edge_pk_hash", "_edge_journal_epoch", "_edge_commit_seq",
                "_edge_deleted", *(c for c, _ in MIRRORS)]
    else:
        cols = ["device_id", "event_ts", "row_id", *(c for c, _ in MIRRORS)]
    data = buf.getvalue()
    with tempfile.NamedTemporaryFile(suffix=".copy") as fh:
        fh.write(data)
        fh.flush()
        start = time.perf_counter()
        await conn.copy_to_table(clone, source=fh.name, columns=cols, format="text")
        elapsed = time.perf_counter() - start
    await conn.execute(f"DROP TABLE {quote_ident(clone)}")
    return n / elapsed


# ------------------------------------------------------------------ one run

async def seed_and_approve(pool: asyncpg.Pool, seed: Device) -> dict[str, str]:
    """The registry decides both schemas before the fleet starts: a seed device's first
    batches open the registry reviews, which are approved (every column mirrored)."""
    pipe = IngestPipeline(pool)
    for b in (state_batch(seed, ROWS), telemetry_batch(seed, ROWS)):
        out = await pipe.handle(b.topic, b.payload)
        assert out.status is OutcomeStatus.STAGED and out.code == "schema_review", out
    project_id = await pool.fetchval("SELECT project_id FROM edge_devices WHERE id = $1",
                                     seed.id)
    approved = await approve_registry(pool, project_id)
    assert approved == 2, approved
    await Replayer(pool).drain_pending()
    rows = await pool.fetch("SELECT source_table, target_table FROM edge_table_lineages "
                            "WHERE device_id = $1", seed.id)
    return {r["source_table"]: r["target_table"] for r in rows}


def ms(seconds: float) -> float:
    return seconds * 1000.0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def verify(pool: asyncpg.Pool, fleet: Fleet, targets: dict[str, str]) -> dict[str, int]:
    """Every batch sent is in the ledger exactly once, and the targets hold exactly the
    rows they sent: one row per state key, one per telemetry row (nothing doubled)."""
    ids = [uuid.UUID(b.batch_id) for b in fleet.sent]
    ledger = await pool.fetchrow(
        "SELECT count(*) AS n, count(DISTINCT batch_id) AS distinct_ids, "
        "count(*) FILTER (WHERE outcome = 'materialized') AS materialized "
        "FROM edge_export_segments WHERE batch_id = ANY($1::uuid[])", ids)
    keys: dict[uuid.UUID, set[int]] = {}
    tele_rows = 0
    for b in fleet.sent:
        if b.keys is not None:
            keys.setdefault(b.device.id, set()).update(b.keys)
        else:
            tele_rows += b.rows
    state_devices = list(keys)
    state = await pool.fetchval(
        f"SELECT count(*) FROM {quote_ident(targets[STATE_TABLE])} "
        "WHERE device_id = ANY($1::uuid[])", state_devices)
    tele_devices = list({b.device.id for b in fleet.sent if b.keys is None})
    tele = await pool.fetchrow(
        f"SELECT count(*) AS n, count(DISTINCT (device_id, row_id)) AS distinct_rows "
        f"FROM {quote_ident(targets[TELEMETRY_TABLE])} WHERE device_id = ANY($1::uuid[])",
        tele_devices)
    return {"batches_sent": len(ids), "ledger_rows": ledger["n"],
            "ledger_distinct": ledger["distinct_ids"], "materialized": ledger["materialized"],
            "state_rows_expected": sum(map(len, keys.values())), "state_rows": state,
            "telemetry_rows_expected": tele_rows, "telemetry_rows": tele["n"],
            "telemetry_distinct_rows": tele["distinct_rows"]}


async def run(cfg: Config, log: Callable[[str], None]) -> dict[str, Any]:
    results: dict[str, Any] = {"config": {k: str(v) if isinstance(v, Path) else v
                                          for k, v in cfg.__dict__.items()}}
    with tempfile.TemporaryDirectory(prefix="fanin-") as tmp:
        work = Path(tmp)
        server = (TunedPostgres(work, statements=cfg.statements_dir is not None,
                                settings=cfg.pg_settings)
                  if cfg.postgres == "tuned" else None)
        if server is not None:
            server.start()
        try:
            results |= await _in_database(cfg, work, server.url if server else BASE_DB, log)
        finally:
            if server is not None:
                server.stop()
    return results


async def _in_database(cfg: Config, work: Path, base: str, log: Callable[[str], None]
                       ) -> dict[str, Any]:
    async with scratch_database(base, "edgesync_fanin") as url:
        return await _fleet(cfg, work, url, log)


async def _fleet(cfg: Config, work: Path, url: str, log: Callable[[str], None]
                 ) -> dict[str, Any]:
    results: dict[str, Any] = {}
    broker = Broker(work)
    pool = await create_pool(url, max_size=4)
    worker: Worker | None = None
    try:
        await broker.start()
        async with pool.acquire() as conn:
            await migrate(conn)
            if cfg.statements_dir is not None:
                await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            project_id = await edgesync.fleet.ensure_project(conn, "fanin", "fanin")
            await conn.execute("UPDATE edge_projects SET policy = policy || $2 "
                               "WHERE id = $1", project_id,
                               {"schema_coalescing_mode": "project"})
            start = time.perf_counter()
            total = sum(cfg.scales)
            everyone = await register_fleet(conn, project_id, "fanin", total, "dev-")
            results["register_devices_per_s"] = total / (time.perf_counter() - start)
            (seed,) = await register_fleet(conn, project_id, "fanin", 1, "seed-")
        targets = await seed_and_approve(pool, seed)
        log(f"registered {total} devices ({cfg.postgres} PostgreSQL); targets {targets}")
        worker = Worker(work, url, broker.url)
        await worker.start()
        # Index scans only: without statistics (the shared server of this machine runs
        # with autovacuum off, so nothing analyzes the ledger) ``id > $1`` is planned as
        # a scan of the whole ledger (auto_explain: 740 of them in a 40 s run, 3.2 s of
        # PostgreSQL time taken from the worker's cores).
        watch_conn = await asyncpg.connect(url, server_settings={"enable_seqscan": "off"})
        async with Watcher(watch_conn).running() as watcher, \
                Publishers("127.0.0.1", broker.port, cfg.publishers) as pubs:
            fleet = Fleet(pubs, watcher)
            results |= await Figures(cfg, fleet, worker, pool, targets, broker,
                                     log).all(everyone)
            results["watcher_swept"] = watcher.swept
        await watch_conn.close()
    finally:
        if worker is not None:
            worker.stop()
        broker.stop()
        await pool.close()
    return results




def make_state(d: Device) -> Batch:
    return state_batch(d, ROWS)


def make_tele(d: Device) -> Batch:
    return telemetry_batch(d, ROWS)


class Figures:
    """The figures of one run, in order: the device scales ascending (the headline
    figures right after the headline scale, before larger fleets exist), RSS last."""

    def __init__(self, cfg: Config, fleet: Fleet, worker: Worker, pool: asyncpg.Pool,
                 targets: dict[str, str], broker: Broker, log: Callable[[str], None]) -> None:
        self.cfg, self.fleet, self.worker, self.pool = cfg, fleet, worker, pool
        self.targets, self.broker, self.log = targets, broker, log
        self.out: dict[str, Any] = {"scales": []}
        self.problems: dict[str, dict[str, int]] = {}

    async def _vacuum(self) -> None:
        """Before a figure: what autovacuum would have done by then on a production server
        (the shared server of this machine runs with autovacuum off, and one target table
        takes every figure's rows: its dead versions and the ledger's would pile up from
        one figure into the next), done outside the figure's window; then a checkpoint, so
        that none is half done when the window opens."""
        if not self.cfg.vacuum:
            return
        started = time.perf_counter()
        async with self.pool.acquire() as conn:
            await conn.execute("VACUUM (ANALYZE)")
            await conn.execute("CHECKPOINT")
        self.out.setdefault("vacuum_s", []).append(round(time.perf_counter() - started, 1))

    @contextlib.asynccontextmanager
    async def _window(self, tag: str) -> AsyncIterator[None]:
        """Around a window: the cores each kind of process used (``cores_<tag>``), the
        groups the worker wrote (``groups_<tag>``: count, mean size, mean ms from start
        to commit), the WAL written and checkpoints begun (``wal_<tag>``), the bench's
        own collector pauses (``bench_gc_<tag>``), and when asked, the worker's profiles
        and PostgreSQL's statements."""
        pid = self.worker.proc.pid if self.worker.proc is not None else None
        groups = await self.worker.group_totals()
        wal = await self._wal()
        if self.cfg.statements_dir is not None:
            async with self.pool.acquire() as conn:
                await conn.execute("SELECT pg_stat_statements_reset()")
        before, started = cpu_by_kind(pid), time.monotonic()
        profilers = await self._profilers(tag, pid)
        # What the bench itself holds (every batch sent so far, ~100,000s of objects) out
        # of its collector's sight: a full collection of it stalled this process for up
        # to 150 ms mid-window, the watcher with it, and every batch committed meanwhile
        # was seen that much late: one such stall in the latency run is its p99.
        gc.freeze()
        with bench_pauses() as pauses:
            yield
        self.out[f"bench_gc_{tag}"] = {"collections": len(pauses),
                                       "max_ms": round(max(pauses, default=0.0), 1)}
        for proc in profilers:
            proc.send_signal(signal.SIGINT)
            await proc.wait()
        self.out[f"cores_{tag}"] = cpu_split(before, cpu_by_kind(pid),
                                             time.monotonic() - started)
        after = await self.worker.group_totals()
        wal_after = await self._wal()
        self.out[f"wal_{tag}"] = {"mb": round((wal_after[0] - wal[0]) / 2**20, 1),
                                  "checkpoints": wal_after[1] - wal[1]}
        if self.cfg.statements_dir is not None:
            await self._statements(self.cfg.statements_dir / f"{tag}.txt")
        if n := after.get("groups", 0) - groups.get("groups", 0):  # the groups written
            self.out[f"groups_{tag}"] = {
                "groups": int(n),
                "mean_size": round((after["batches"] - groups["batches"]) / n, 1),
                "mean_ms": round(1000 * (after["seconds"] - groups["seconds"]) / n, 1)}

    async def _wal(self) -> tuple[int, int]:
        """WAL bytes written so far, checkpoints begun so far (timed or requested: a
        checkpoint forced by WAL volume counts as requested, as the bench's own do)."""
        async with self.pool.acquire() as conn:
            row = await conn.fetchrow(
                "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn AS wal, "
                "checkpoints_timed + checkpoints_req AS n FROM pg_stat_bgwriter")
        assert row is not None
        return int(row["wal"]), int(row["n"])

    async def _profilers(self, tag: str, pid: int | None) -> list[asyncio.subprocess.Process]:
        """``EDGESYNC_FANIN_PROFILE``: py-spy (raw stacks) of the worker and of this bench,
        and perf (call graphs) of the worker, for the window."""
        where = self.cfg.profile_dir
        if where is None or pid is None:
            return []
        argvs = [["py-spy", "record", "-p", str(pid), "-r", "200", "-f", "raw", "-o",
                  str(where / f"{tag}.txt")],
                 ["py-spy", "record", "-p", str(os.getpid()), "-r", "200", "-f", "raw", "-o",
                  str(where / f"bench_{tag}.txt")],
                 ["perf", "record", "-F", "499", "-g", "-p", str(pid), "-o",
                  str(where / f"{tag}.perf")]]
        return [await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
            for argv in argvs]

    async def _statements(self, path: Path) -> None:
        """The window's statements by total time (pg_stat_statements, tuned cluster)."""
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT calls, total_exec_time, total_plan_time, rows, "
                "left(regexp_replace(query, '\\s+', ' ', 'g'), 160) AS q FROM pg_stat_statements "
                "ORDER BY total_exec_time + total_plan_time DESC LIMIT 40")
        lines = [f"{r['total_exec_time']:10.0f} ms {r['total_plan_time']:8.0f} ms planning "
                 f"{r['calls']:8} calls {r['total_exec_time'] / max(r['calls'], 1):8.3f} ms/call "
                 f"{r['rows']:9} rows {r['q']}" for r in rows]
        await asyncio.to_thread(path.write_text, "\n".join(lines) + "\n")

    def _check(self, tag: str, tracked: Tracked) -> None:
        if bad := not_materialized(tracked):
            self.problems[tag] = bad

    async def all(self, everyone: list[Device]) -> dict[str, Any]:
        at = 0
        headline: list[Device] = []
        for n in self.cfg.scales:
            devices = everyone[at:at + n]
            at += n
            await self.scale(devices)
            if n == self.cfg.devices:
                headline = devices
                await self.headline(devices)
        rows = self.out["scales"]
        base = rows[0]["per_batch_ms"]
        for r in rows:
            r["cost_ratio_to_smallest"] = (r["per_batch_ms"] / base
                                           if base and r["per_batch_ms"] else None)
        await self.rss(headline)
        self.out["problems"] = self.problems
        return self.out

    async def scale(self, devices: list[Device]) -> None:
        """First batches of a new device set (lineage creation), then saturation."""
        n = len(devices)
        first = await self.fleet.saturate(make_state, devices, self.cfg.warm_cap)
        self._check(f"first_{n}", first)
        lineage_rate, warmed, _ = first.rate()
        row: dict[str, Any] = {"devices": n, "first_batches_per_s": lineage_rate,
                               "first_batches": warmed, "batches_per_s": 0.0,
                               "per_batch_ms": None, "batches": 0, "window_s": 0.0}
        self.out["scales"].append(row)
        if warmed < n:  # the warm cap ended it: a steady figure would be mostly first batches
            self.log(f"{n} devices: only {warmed} first batches within the warm cap "
                     f"({lineage_rate:.1f}/s); no steady figure")
            return
        await self._vacuum()
        async with self._window(f"state_{n}"):
            steady = await self.fleet.saturate(make_state, cycle(devices, self.cfg.batches),
                                               self.cfg.cap)
        self._check(f"state_{n}", steady)
        rate, count, span = steady.rate()
        row |= {"batches_per_s": rate, "per_batch_ms": ms(1 / rate) if rate else None,
                "batches": count, "window_s": span}
        self.log(f"{n} devices: first batches {warmed} at {lineage_rate:.1f}/s; steady "
                 f"{count} batches in {span:.1f}s: {rate:.1f}/s")

    async def headline(self, devices: list[Device]) -> None:
        cfg, out, targets = self.cfg, self.out, self.targets
        row = out["scales"][-1]
        out |= {"state_batches_per_s": row["batches_per_s"],
                "state_rows_per_s": row["batches_per_s"] * ROWS,
                "state_window_s": row["window_s"],
                "lineage_first_batches_per_s": row["first_batches_per_s"],
                "lineage_first_batches": row["first_batches"]}
        async with self.pool.acquire() as conn:
            out["state_copy_rows_per_s"] = await copy_reference(
                conn, targets[STATE_TABLE], "state", devices, cfg.copy_rows)
        out["state_ratio_to_copy"] = out["state_rows_per_s"] / out["state_copy_rows_per_s"]
        self.log(f"state {out['state_rows_per_s']:.0f} rows/s, "
                 f"COPY {out['state_copy_rows_per_s']:.0f}")

        # Latency at half the measured state maximum, the watcher polling every 5 ms, right
        # after the state figure it derives from (after the telemetry saturation, the
        # first seconds measured that burst's aftermath: session 6 in
        # ``git show 758afd0:docs/benchmarks.md``).
        half = max(0.5 * out["state_batches_per_s"], 0.5)
        if cfg.latency_rate is not None:  # side-by-side trials at one rate
            half = cfg.latency_rate
        self.fleet.watcher.interval = 0.005
        await self._vacuum()
        async with self._window("latency"):
            paced = await self.fleet.paced(make_state, cycle(devices, 0), half, cfg.latency_s)
        self.fleet.watcher.interval = 0.02
        self._check("latency", paced)
        lat = [paced.seen[b] - paced.published[b] for b in paced.seen]
        if cfg.latency_dump is not None:  # (publish s, latency s) of every batch
            t0 = min(paced.published.values())
            points = sorted((paced.published[b] - t0, paced.seen[b] - paced.published[b])
                            for b in paced.seen)
            await asyncio.to_thread(cfg.latency_dump.write_bytes, orjson.dumps(points))
        out |= {"latency_rate_batches_per_s": half, "latency_samples": len(lat),
                "latency_p50_ms": ms(pct(lat, 0.5)) if lat else None,
                "latency_p99_ms": ms(pct(lat, 0.99)) if lat else None,
                "latency_max_ms": ms(max(lat)) if lat else None}
        self.log(f"latency at {half:.1f} batches/s: {len(lat)} samples, p50 "
                 f"{out['latency_p50_ms']} ms, p99 {out['latency_p99_ms']} ms")

        # Telemetry: the devices' first telemetry batches (new lineages), then saturation.
        first = await self.fleet.saturate(make_tele, devices, cfg.warm_cap)
        self._check("telemetry_first", first)
        out["telemetry_first_batches_per_s"], _, _ = first.rate()
        await self._vacuum()
        async with self._window("telemetry"):
            steady = await self.fleet.saturate(make_tele, cycle(devices, cfg.batches), cfg.cap)
        self._check("telemetry", steady)
        rate, count, span = steady.rate()
        out |= {"telemetry_batches_per_s": rate, "telemetry_rows_per_s": rate * ROWS,
                "telemetry_batches": count, "telemetry_window_s": span}
        async with self.pool.acquire() as conn:
            out["telemetry_copy_rows_per_s"] = await copy_reference(
                conn, targets[TELEMETRY_TABLE], "telemetry", devices, cfg.copy_rows)
        out["telemetry_ratio_to_copy"] = (out["telemetry_rows_per_s"]
                                          / out["telemetry_copy_rows_per_s"])
        self.log(f"telemetry {out['telemetry_rows_per_s']:.0f} rows/s, "
                 f"COPY {out['telemetry_copy_rows_per_s']:.0f}")

    async def _sample_rss(self, samples: list[tuple[float, int]], t0: float) -> None:
        """VmRSS of the new worker process every 0.5 s."""
        while True:
            proc = self.worker.proc
            if proc is not None and proc.poll() is None:
                with contextlib.suppress(OSError):
                    samples.append((time.monotonic() - t0, self.worker.rss_bytes()))
            await asyncio.sleep(0.5)

    async def rss(self, devices: list[Device]) -> None:
        """Worker RSS while a backlog waits in the broker for its persistent session:
        published while the worker is stopped, sampled while it drains."""
        cfg, out, worker = self.cfg, self.out, self.worker
        # Everything so far committed exactly once (this figure may leave a backlog).
        out["checks"] = await verify(self.pool, self.fleet, self.targets)
        worker.stop()
        await worker.subscribe_while_stopped("127.0.0.1", self.broker.port)
        start = time.monotonic()
        flood = await self.fleet.flood(make_tele, cycle(devices, 0), cfg.rss_messages)
        out["rss_publish_s"] = time.monotonic() - start
        # Sampled from the moment the process exists: it may take the backlog in while
        # it is still starting.
        samples: list[tuple[float, int]] = []
        t0 = time.monotonic()
        sampling = asyncio.create_task(self._sample_rss(samples, t0))
        await worker.start()
        out["rss_started_after_s"] = time.monotonic() - t0
        while time.monotonic() - t0 < cfg.rss_s and flood.outstanding:
            flood.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(flood.changed.wait(), 0.5)
        sampling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampling
        samples.append((time.monotonic() - t0, worker.rss_bytes()))
        if not flood.outstanding:
            self._check("rss", flood)
        mb = [b / 2**20 for _, b in samples]
        started = out["rss_started_after_s"]
        at_start = next((m for (t, _), m in zip(samples, mb, strict=True) if t >= started),
                        mb[-1])
        out |= {"rss_messages": cfg.rss_messages, "rss_max_mb": max(mb),
                "rss_subscribed_mb": at_start, "rss_last_mb": mb[-1],
                "rss_window_s": samples[-1][0], "rss_drained": len(flood.seen),
                "rss_trace_mb": [round(m) for m in mb[:: max(1, len(mb) // 12)]]}
        self.log(f"RSS with {cfg.rss_messages} queued: max {max(mb):.0f} MB, subscribed "
                 f"{at_start:.0f}, last {mb[-1]:.0f} over {samples[-1][0]:.0f}s; "
                 f"{len(flood.seen)} drained")
        if not flood.outstanding:
            out["checks_after_rss"] = await verify(self.pool, self.fleet, self.targets)


# ------------------------------------------------------------------ output

def svg_plot(series: dict[str, list[dict[str, Any]]], title: str) -> str:
    """Per-batch cost (ms, linear) against devices (log scale), one line per run, no
    dependency. ``series``: a label for each run's ``scales`` rows."""
    import math

    lines = {label: [(r["devices"], r["per_batch_ms"]) for r in rows if r["per_batch_ms"]]
             for label, rows in series.items()}
    every = [p for pts in lines.values() for p in pts]
    w, h, left, bottom, top, right = 560, 340, 60, 40, 30, 20
    xs = [math.log10(d) for d, _ in every]
    x0, x1 = min(xs) - 0.2, max(xs) + 0.2
    ymax = max(c for _, c in every) * 1.15

    def sx(d: float) -> float:
        return left + (math.log10(d) - x0) / (x1 - x0) * (w - left - right)

    def sy(c: float) -> float:
        return h - bottom - c / ymax * (h - bottom - top)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
             'font-family="sans-serif" font-size="11">',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<text x="{w / 2}" y="18" text-anchor="middle" font-size="13">{title}</text>',
             f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" '
             'stroke="black"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>',
             f'<text x="{w / 2}" y="{h - 8}" text-anchor="middle">devices (log scale)</text>',
             f'<text x="14" y="{h / 2}" transform="rotate(-90 14 {h / 2})" '
             'text-anchor="middle">ms per batch</text>']
    for i in range(5):
        c = ymax * i / 4
        parts.append(f'<text x="{left - 6}" y="{sy(c) + 4:.1f}" text-anchor="end">{c:.0f}</text>')
        parts.append(f'<line x1="{left}" y1="{sy(c):.1f}" x2="{w - right}" y2="{sy(c):.1f}" '
                     'stroke="#ddd"/>')
    for d in sorted({d for d, _ in every}):
        parts.append(f'<text x="{sx(d):.1f}" y="{h - bottom + 14}" text-anchor="middle">'
                     f'{d:,}</text>')
    colors = ["#c33", "#36c", "#393", "#c90", "#939"]
    for n, (label, pts) in enumerate(lines.items()):
        color = colors[n % len(colors)]
        poly = " ".join(f"{sx(d):.1f},{sy(c):.1f}" for d, c in pts)
        parts.append(f'<polyline points="{poly}" fill="none" stroke="{color}" '
                     'stroke-width="2"/>')
        for d, c in pts:
            parts.append(f'<circle cx="{sx(d):.1f}" cy="{sy(c):.1f}" r="3.5" fill="{color}"/>')
            parts.append(f'<text x="{sx(d) + 6:.1f}" y="{sy(c) - 6:.1f}" fill="{color}">'
                         f'{c:.0f}</text>')
        parts.append(f'<text x="{left + 12}" y="{top + 14 + 14 * n}" fill="{color}">'
                     f'{label}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def report(results: dict[str, Any]) -> str:
    lines = ["", "devices  first batches/s  batches/s  ms/batch  ratio  (batches, window s)"]
    for r in results["scales"]:
        cost = f"{r['per_batch_ms']:8.2f}" if r["per_batch_ms"] else "       -"
        ratio = (f"{r['cost_ratio_to_smallest']:5.2f}" if r["cost_ratio_to_smallest"]
                 else "    -")
        lines.append(f"{r['devices']:7,}  {r['first_batches_per_s']:15.1f}  "
                     f"{r['batches_per_s']:9.1f}  {cost}  {ratio}  "
                     f"({r['batches']}, {r['window_s']:.1f})")
    windows = [k for k in results if k.startswith(("cores_", "groups_", "wal_", "bench_gc_"))]
    skip = {"scales", "config", "checks", "checks_after_rss", "problems", "rss_trace_mb",
            *windows}
    width = max(len(k) for k in results if k not in skip)
    for k, v in results.items():
        if k in skip:
            continue
        lines.append(f"  {k:<{width}}  {v:14,.2f}" if isinstance(v, float) and abs(v) >= 1
                     else f"  {k:<{width}}  {v:14.4f}" if isinstance(v, float)
                     else f"  {k:<{width}}  {v!s:>14}")
    for k in ("rss_trace_mb", *windows, "checks", "checks_after_rss", "problems"):
        if k in results:
            lines.append(f"  {k}: {results[k]}")
    return "\n".join(lines)


@pytest.mark.benchmark(group="fanin")
@pytest.mark.timeout(6 * 3600)
def test_fleet_fan_in(benchmark: Any) -> None:
    smoke = bool(benchmark.disabled)
    cfg = Config.from_env(smoke)
    results = run_once(benchmark, "fanin", lambda log: run(cfg, log))
    benchmark.extra_info.update({k: v for k, v in results.items() if k != "config"})
    print(report(results))
    if path := os.environ.get("EDGESYNC_FANIN_JSON"):
        Path(path).write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    if path := os.environ.get("EDGESYNC_FANIN_SVG"):
        Path(path).write_text(svg_plot({"this run": results["scales"]},
                                       "Fleet fan-in: cost of one 50-row state batch"))
    checks = results["checks"]
    # Correctness only (never speed): every batch arrived once and materialized, and the
    # targets hold each state key and telemetry row exactly once.
    assert results["problems"] == {}, results["problems"]
    for c in filter(None, (checks, results.get("checks_after_rss"))):
        assert c["ledger_rows"] == c["ledger_distinct"] == c["materialized"] \
            == c["batches_sent"], c
        assert c["state_rows"] == c["state_rows_expected"], c
        assert c["telemetry_rows"] == c["telemetry_distinct_rows"] \
            == c["telemetry_rows_expected"], c
    if smoke:
        assert "checks_after_rss" in results, "the RSS backlog did not drain"
        assert results["rss_drained"] == cfg.rss_messages
