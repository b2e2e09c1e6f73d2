"""Fleet ingest after an outage: a backlog burst, then half its rate, on the machine's
PostgreSQL as it is configured — and where the slowest 1 % of batches spend their time.

The shape (issue 31), for each pipeline (state upserts, then telemetry), on a fresh
database of the local PostgreSQL (its own settings: here autovacuum off, ``max_wal_size``
1 GB, ``shared_buffers`` 128 MB, ``synchronous_commit`` on), a private Mosquitto and an
``edgesync serve`` with its defaults (plus ``--trace-batches``):

1. ``devices`` registered devices of one project, its registry's approval of both schemas
   (a seed device's first batches), then every device's first state and telemetry batch
   (one lineage each per table);
2. **burst**: ``burst`` batches of 50 rows from every device published at once (the
   backlog of an outage), timed from the first publish until the last row is committed;
3. **paced**: at once, half the burst's batch rate for ``paced_s`` seconds; each batch is
   timed from its publish until its ledger row — committed in the transaction that
   writes its rows — is visible to another connection (polled every 5 ms);
4. **ceiling**: one COPY of as many rows of the same shape into a clone of the target (its
   keys, indexes and partitions), after the paced phase.

No VACUUM and no CHECKPOINT between the phases. The tail's anatomy reads the worker's
``--trace-batches`` file: for the slowest 1 % of paced batches and for the middle ones
(p45 to p55), the mean time from publish to the worker receiving the message, then received
→ submitted → grouped → written → committed → acknowledged, and acknowledged → seen by
the bench; the group sizes; and what PostgreSQL was doing meanwhile (the share of the
batches' time spans that a checkpoint was running, from the server log's ``checkpoint
starting``/``complete`` lines; WAL written per second; autovacuum workers running).

Measure (two consecutive runs are the figure)::

    pytest benches/bench_outage.py --benchmark-only -s -p no:cacheprovider

Smoke (CI: 10 devices, 3 burst batches each, 2 s paced; asserts every batch arrived once,
never a speed): ``pytest benches/bench_outage.py --benchmark-disable``.

Knobs (environment): ``EDGESYNC_OUTAGE_DEVICES`` (1000), ``EDGESYNC_OUTAGE_BURST`` (20
batches per device), ``EDGESYNC_OUTAGE_PACED_S`` (10), ``EDGESYNC_OUTAGE_PUBLISHERS`` (4),
``EDGESYNC_OUTAGE_SERVE_ENV`` (``NAME=value,…`` more settings for ``edgesync serve``, for
side-by-side trials), ``EDGESYNC_OUTAGE_JSON`` (write the figures there). Results:
docs/benchmarks.md, "Fleet ingest after an outage".
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import glob
import itertools
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest
from bench_fanin import (
    ROWS,
    Fleet,
    copy_reference,
    cycle,
    make_state,
    make_tele,
    ms,
    not_materialized,
    pct,
    seed_and_approve,
    verify,
)
from bench_ingest import BASE_DB
from fanin_kit import (
    PG_BIN,
    STATE_TABLE,
    TELEMETRY_TABLE,
    Broker,
    Publishers,
    Tracked,
    Watcher,
    Worker,
    bench_pauses,
    register_fleet,
    run_once,
    scratch_database,
)

import edgesync.fleet
from edgesync.store import create_pool, migrate

# The steps of a batch inside the worker (edgesync.ingest.BatchTrace), in order.
STEPS = ["received", "submitted", "grouped", "written", "committed", "acked"]
WARM_CAP = 900.0
PG_LOGS = "/var/log/postgresql/postgresql-*-main.log"


@dataclass(frozen=True)
class Config:
    devices: int
    burst: int
    paced_s: float
    publishers: int
    serve_env: dict[str, str] = field(default_factory=dict)
    # The paced phases' WAL by relation (pg_waldump; EDGESYNC_OUTAGE_WAL=0: off).
    wal_detail: bool = True
    # Side by side in one run (EDGESYNC_OUTAGE_TRIALS): (name, more settings of serve).
    trials: list[tuple[str, dict[str, str]]] = field(
        default_factory=lambda: [("defaults", {})])

    @classmethod
    def from_env(cls, smoke: bool) -> Config:
        env = os.environ.get
        serve_env = _pairs("EDGESYNC_OUTAGE_SERVE_ENV", env("EDGESYNC_OUTAGE_SERVE_ENV", ""))
        trials = _trials(env("EDGESYNC_OUTAGE_TRIALS", ""))
        if smoke:
            return cls(devices=10, burst=3, paced_s=2, publishers=2, serve_env=serve_env,
                       trials=trials, wal_detail=False)
        return cls(devices=_positive("EDGESYNC_OUTAGE_DEVICES", env("EDGESYNC_OUTAGE_DEVICES",
                                                                    "1000")),
                   burst=_positive("EDGESYNC_OUTAGE_BURST", env("EDGESYNC_OUTAGE_BURST", "20")),
                   paced_s=float(env("EDGESYNC_OUTAGE_PACED_S", "10")),
                   publishers=_positive("EDGESYNC_OUTAGE_PUBLISHERS",
                                        env("EDGESYNC_OUTAGE_PUBLISHERS", "4")),
                   serve_env=serve_env, trials=trials,
                   wal_detail=env("EDGESYNC_OUTAGE_WAL", "1") != "0")


def _positive(name: str, value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{name} must be a whole number of at least 1, not {value!r}")
    return int(value)


def _trials(value: str) -> list[tuple[str, dict[str, str]]]:
    """``name:NAME=value,…;name:…`` → the trials, in order (default: one, serve's
    defaults)."""
    out = []
    for item in filter(None, (i.strip() for i in value.split(";"))):
        name, sep, pairs = item.partition(":")
        if not sep or not re.fullmatch(r"[a-z0-9_-]+", name.strip()):
            raise ValueError(f"EDGESYNC_OUTAGE_TRIALS: {item!r} is not name:NAME=value,… "
                             "(e.g. 'before:;after:EDGESYNC_INGEST_GROUP_MS=40')")
        out.append((name.strip(), _pairs("EDGESYNC_OUTAGE_TRIALS", pairs)))
    return out or [("defaults", {})]


def _pairs(name: str, value: str) -> dict[str, str]:
    out = {}
    for item in filter(None, (i.strip() for i in value.split(","))):
        key, sep, setting = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{name}: {item!r} is not NAME=value "
                             "(e.g. EDGESYNC_LOG_LEVEL=DEBUG)")
        out[key.strip()] = setting.strip()
    return out


# ------------------------------------------------------------------ what PostgreSQL did

class ServerActivity:
    """WAL position and autovacuum workers sampled every 100 ms during a phase, and the
    checkpoints the server log shows (``log_checkpoints`` is on by default)."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        self.samples: list[tuple[float, int, int]] = []  # (monotonic, wal bytes, autovacuum)
        self._task: asyncio.Task[None] | None = None
        # The log's wall-clock timestamps onto this machine's monotonic clock.
        self._offset = time.time() - time.monotonic()

    async def _sample(self) -> None:
        while True:
            row = await self.conn.fetchrow(
                "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn AS wal, (SELECT count(*) FROM "
                "pg_stat_activity WHERE backend_type = 'autovacuum worker') AS av")
            assert row is not None
            self.samples.append((time.monotonic(), int(row["wal"]), int(row["av"])))
            await asyncio.sleep(0.1)

    def start(self) -> None:
        self._task = asyncio.create_task(self._sample())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def checkpoints(self, since: float) -> list[tuple[float, float]]:
        """(start, end) of each checkpoint in the server log since monotonic ``since``
        (an empty list when the log cannot be read: the anatomy then says unknown)."""
        spans: list[tuple[float, float]] = []
        begun: float | None = None
        stamp = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) \w+ .*checkpoint "
                           r"(starting|complete)")
        for path in glob.glob(PG_LOGS):
            try:
                text = Path(path).read_text(errors="replace")
            except OSError:
                continue
            for line in text.splitlines()[-5000:]:
                m = stamp.match(line)
                if not m:
                    continue
                at = datetime.fromisoformat(m[1] + "+00:00").timestamp() - self._offset
                if m[2] == "starting":
                    begun = at
                elif begun is not None:
                    if at >= since:
                        spans.append((begun, at))
                    begun = None
            if begun is not None and begun >= since - 600:
                spans.append((begun, time.monotonic()))
        return spans

    def during(self, start: float, end: float) -> tuple[float, float]:
        """WAL MB/s and mean autovacuum workers over [start, end] (the samples around it)."""
        inside = [s for s in self.samples if start - 0.1 <= s[0] <= end + 0.1]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return 0.0, 0.0
        wal = (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0]) / 2**20
        return wal, sum(s[2] for s in inside) / len(inside)


class WalByRelation:
    """The WAL a phase wrote, by the relation it was for (pg_waldump over the phase's
    range, kept by a replication slot meanwhile): where a batch's WAL bytes go — the
    target and its indexes, the ledger, lineage counters, commit records — and how much
    of it is full-page images (the first change of a page after a checkpoint began)."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        self.slot = f"outage_{os.getpid()}"
        self.start: str | None = None

    async def begin(self) -> None:
        # (The slot keeps WAL from the last checkpoint's redo point on, not from now.)
        await self.conn.execute("SELECT pg_create_physical_replication_slot($1, true)",
                                self.slot)
        self.start = await self.conn.fetchval("SELECT pg_current_wal_lsn()::text")

    async def end(self, batches: int) -> dict[str, Any]:
        end = await self.conn.fetchval("SELECT pg_current_wal_lsn()::text")
        pg_wal = Path(await self.conn.fetchval("SHOW data_directory")) / "pg_wal"
        db = await self.conn.fetchval(
            "SELECT oid FROM pg_database WHERE datname = current_database()")
        names = {int(r["node"]): r["name"] for r in await self.conn.fetch(
            "SELECT pg_relation_filenode(c.oid) AS node, coalesce(p.relname || ' (partitions)', "
            "c.relname) AS name FROM pg_class c LEFT JOIN pg_inherits i ON i.inhrelid = c.oid "
            "LEFT JOIN pg_class p ON p.oid = i.inhparent "
            "WHERE pg_relation_filenode(c.oid) IS NOT NULL")}
        try:
            proc = await asyncio.create_subprocess_exec(
                str(PG_BIN[0] / "pg_waldump"), "-p", str(pg_wal), "-s", str(self.start),
                "-e", str(end), stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL)
            text, _ = await proc.communicate()
        finally:
            await self.conn.execute("SELECT pg_drop_replication_slot($1)", self.slot)
        rmgr_re = re.compile(rb"rmgr: (\w+)\s+len \(rec/tot\):\s+\d+/\s*(\d+)")
        rel_re = re.compile(rb"blkref #0: rel \d+/(\d+)/(\d+)")
        by: dict[str, int] = {}
        fpw = total = 0
        for line in text.splitlines():
            m = rmgr_re.match(line)
            if not m:
                continue
            size = int(m[2])
            rel = rel_re.search(line)
            if rel is not None and int(rel[1]) != db:
                continue  # another database's (the server is shared)
            total += size
            key = (f"({m[1].decode()} records)" if rel is None
                   else names.get(int(rel[2]), "(other relations: catalogs, dropped)"))
            by[key] = by.get(key, 0) + size
            fpw += size if b" FPW" in line else 0
        top = sorted(by.items(), key=lambda kv: -kv[1])[:8]
        per = max(batches, 1)
        return {"kb_per_batch": round(total / per / 1024, 1),
                "full_page_images_share": round(fpw / max(total, 1), 2),
                "kb_per_batch_by_relation": {k: round(v / per / 1024, 2) for k, v in top}}


class BufferReads:
    """Blocks this database's tables and indexes read into shared buffers during a phase
    (a miss: from the OS's cache or the disk) beside those found there, and the target's
    size beside ``shared_buffers``: whether a batch's upsert waits on index pages that
    no longer fit (the state target's primary key takes a SHA-256 hex per row, so a
    device's inserts land on random leaf pages all over it)."""

    _SQL = ("SELECT coalesce(sum(heap_blks_read + coalesce(idx_blks_read, 0)), 0)::bigint "
            "AS read, coalesce(sum(heap_blks_hit + coalesce(idx_blks_hit, 0)), 0)::bigint "
            "AS hit FROM pg_statio_user_tables")

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        self.before: asyncpg.Record | None = None

    async def begin(self) -> None:
        await self.conn.execute("SELECT pg_stat_clear_snapshot()")
        self.before = await self.conn.fetchrow(self._SQL)

    async def end(self, batches: int, table: str) -> dict[str, Any]:
        await asyncio.sleep(1.0)  # backends report their counters within a second
        await self.conn.execute("SELECT pg_stat_clear_snapshot()")
        after = await self.conn.fetchrow(self._SQL)
        assert after is not None and self.before is not None
        read, hit = after["read"] - self.before["read"], after["hit"] - self.before["hit"]
        sizes = await self.conn.fetchrow(
            "SELECT coalesce(sum(pg_table_size(c.oid)), 0)::bigint, "
            "coalesce(sum(pg_indexes_size(c.oid)), 0)::bigint FROM pg_class c "
            "WHERE c.relkind = 'r' AND (c.relname = $1 OR c.oid IN (SELECT inhrelid FROM "
            "pg_inherits WHERE inhparent = $1::regclass))", table)
        assert sizes is not None
        heap, index = sizes
        shared = await self.conn.fetchval(
            "SELECT setting::bigint * 8192 FROM pg_settings WHERE name = 'shared_buffers'")
        return {"blocks_read_per_batch": round(read / max(batches, 1), 1),
                "hit_share": round(hit / max(read + hit, 1), 3),
                "target_heap_mb": round(heap / 2**20), "target_indexes_mb": round(index / 2**20),
                "shared_buffers_mb": round(shared / 2**20)}


# ------------------------------------------------------------------ the tail's anatomy

def read_trace(path: Path) -> dict[str, dict[str, Any]]:
    out = {}
    if path.exists():
        for line in path.read_bytes().splitlines():
            doc = orjson.loads(line)
            out[doc["batch_id"]] = doc  # a redelivery's line replaces the first
    return out


def anatomy(paced: Tracked, trace: dict[str, dict[str, Any]], activity: ServerActivity,
            checkpoints: list[tuple[float, float]]) -> dict[str, Any]:
    """Mean ms of each step for the slowest 1 % of paced batches and for the middle
    ones, with what PostgreSQL was doing while they were in flight."""
    lat = sorted((paced.seen[b] - paced.published[b], b) for b in paced.seen)
    if not lat:
        return {}
    n = len(lat)
    slow = lat[max(0, n - max(1, n // 100)):]
    middle = lat[int(n * 0.45):max(int(n * 0.55), int(n * 0.45) + 1)]
    out: dict[str, Any] = {}
    for label, chosen in (("slowest_1pct", slow), ("middle", middle)):
        spans: dict[str, list[float]] = {}
        groups, in_checkpoint, wal, autovac = [], 0.0, [], []
        for _, b in chosen:
            published, seen = paced.published[b], paced.seen[b]
            t = trace.get(b)
            if t is None:
                continue
            marks = [("publish→received", published, t["received"])]
            marks += [(f"{a}→{z}", t[a], t[z]) for a, z in itertools.pairwise(STEPS)]
            marks.append(("acked→seen", t["acked"], seen))
            for name, a, z in marks:
                spans.setdefault(name, []).append(max(0.0, z - a))
            groups.append(t["group"])
            overlap = sum(max(0.0, min(seen, e) - max(published, s)) for s, e in checkpoints)
            in_checkpoint += overlap / max(seen - published, 1e-6)
            w, av = activity.during(published, seen)
            wal.append(w)
            autovac.append(av)
        k = len(groups)
        if not k:
            continue
        total = sum(x for x, _ in chosen) / len(chosen)
        out[label] = {"batches": k, "total_ms": round(ms(total), 1),
                      **{name: round(ms(sum(v) / len(v)), 1) for name, v in spans.items()},
                      "group_size": round(sum(groups) / k, 1),
                      "in_checkpoint": round(in_checkpoint / k, 2),
                      "wal_mb_s": round(sum(wal) / k, 1),
                      "autovacuum_workers": round(sum(autovac) / k, 2)}
    out["checkpoints"] = len(checkpoints)
    return out


def timeline(paced: Tracked, trace: dict[str, dict[str, Any]], step: float = 0.5
             ) -> list[dict[str, float]]:
    """The paced phase in ``step``-second slices of publish time: batches, p50 and max
    ms, mean group size (where the slow batches sit: at the start, after the burst, or
    spread out)."""
    if not paced.seen:
        return []
    t0 = min(paced.published.values())
    slices: dict[int, list[tuple[float, int]]] = {}
    for b, seen in paced.seen.items():
        k = int((paced.published[b] - t0) / step)
        slices.setdefault(k, []).append((seen - paced.published[b],
                                         trace.get(b, {}).get("group", 0)))
    out = []
    for k in sorted(slices):
        lat = [x for x, _ in slices[k]]
        out.append({"t": round(k * step, 1), "batches": len(lat),
                    "p50_ms": round(ms(pct(lat, 0.5)), 1), "max_ms": round(ms(max(lat)), 1),
                    "group": round(sum(g for _, g in slices[k]) / len(lat), 1)})
    return out


def burst_profile(burst: Tracked, activity: ServerActivity,
                  checkpoints: list[tuple[float, float]], step: float = 1.0) -> dict[str, Any]:
    """Why one burst is slower than another: its rows committed per ``step`` seconds
    (slowest, median, fastest slice), its WAL MB/s and the seconds of it a checkpoint
    ran through, and the rows/s inside and outside those seconds."""
    if not burst.seen:
        return {}
    t0, t1 = min(burst.published.values()), max(burst.seen.values())
    slices = [0] * (int((t1 - t0) / step) + 1)
    for b, seen in burst.seen.items():
        slices[int((seen - t0) / step)] += burst.rows[b]
    full = sorted(slices[:-1]) or slices  # the last slice is cut short
    spans = [(max(s, t0), min(e, t1)) for s, e in checkpoints if e > t0 and s < t1]
    in_cp = sum(e - s for s, e in spans)

    def rows_in(inside: bool) -> float:
        rows = secs = 0.0
        for k, n in enumerate(slices[:-1]):
            a, z = t0 + k * step, t0 + (k + 1) * step
            share = sum(max(0.0, min(z, e) - max(a, s)) for s, e in spans) / step
            if (share >= 0.5) == inside:
                rows, secs = rows + n, secs + step
        return round(rows / secs) if secs else 0

    wal, _ = activity.during(t0, t1)
    return {"rows_per_s_slices": {"min": round(full[0] / step), "p50": round(
                full[len(full) // 2] / step), "max": round(full[-1] / step)},
            "wal_mb_s": round(wal, 1), "checkpoint_s": round(in_cp, 1),
            "rows_per_s_in_checkpoint": rows_in(True),
            "rows_per_s_outside": rows_in(False)}


# ------------------------------------------------------------------ one run

async def run(cfg: Config, log: Any) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="outage-") as tmp:
        work = Path(tmp)
        async with scratch_database(BASE_DB, "edgesync_outage") as url:
            return await _fleet(cfg, work, url, log)


async def _fleet(cfg: Config, work: Path, url: str, log: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"config": dict(cfg.__dict__)}
    broker = Broker(work)
    pool = await create_pool(url, max_size=4)
    # One worker per trial, one running at a time (the others' sessions forgotten: the
    # broker would queue every batch for them too).
    workers: dict[str, Worker] = {}
    for name, env in cfg.trials:
        (work / name).mkdir()
        workers[name] = Worker(work / name, url, broker.url, env={
            "EDGESYNC_TRACE_BATCHES": str(work / name / "trace.jsonl"), **cfg.serve_env, **env})
    running: list[Worker] = []

    async def switch_to(name: str) -> None:
        for w in running:
            w.stop()
            await w.forget_session("127.0.0.1", broker.port)
        running[:] = [workers[name]]
        await workers[name].start()

    try:
        await broker.start()
        async with pool.acquire() as conn:
            await migrate(conn)
            project_id = await edgesync.fleet.ensure_project(conn, "outage", "outage")
            await conn.execute("UPDATE edge_projects SET policy = policy || $2 WHERE id = $1",
                               project_id, {"schema_coalescing_mode": "project"})
            devices = await register_fleet(conn, project_id, "outage", cfg.devices, "dev-")
            (seed,) = await register_fleet(conn, project_id, "outage", 1, "seed-")
        targets = await seed_and_approve(pool, seed)
        await switch_to(cfg.trials[0][0])
        watch_conn = await asyncpg.connect(url, server_settings={"enable_seqscan": "off"})
        activity = ServerActivity(await asyncpg.connect(url))
        problems: dict[str, dict[str, int]] = {}
        phases: dict[str, Any] = {}
        async with Watcher(watch_conn).running() as watcher, \
                Publishers("127.0.0.1", broker.port, cfg.publishers) as pubs:
            fleet = Fleet(pubs, watcher)
            started = time.monotonic()
            for make in (make_state, make_tele):  # every device's first batches
                first = await fleet.saturate(make, devices, WARM_CAP)
                if bad := not_materialized(first):
                    problems[f"first_{make.__name__}"] = bad
            out["first_batches_per_s"] = 2 * cfg.devices / (time.monotonic() - started)
            log(f"{cfg.devices} devices: first batches at {out['first_batches_per_s']:.0f}/s")
            for kind, make, table in (("state", make_state, STATE_TABLE),
                                      ("telemetry", make_tele, TELEMETRY_TABLE)):
                rate = None  # every trial paced at the first trial's half-burst rate
                for name, _ in cfg.trials:
                    if running[0] is not workers[name]:
                        await switch_to(name)
                    label = kind if len(cfg.trials) == 1 else f"{kind} {name}"
                    phases[label] = fig = await _phases(cfg, fleet, activity, label, make,
                                                        devices, problems, log, rate,
                                                        targets[table])
                    fig["trial"] = name
                    rate = rate or fig["paced_batches_per_s"]
                async with pool.acquire() as conn:
                    copy = await copy_reference(conn, targets[table], kind, devices,
                                                cfg.devices * cfg.burst * ROWS)
                for label, fig in phases.items():
                    if label.split()[0] == kind:
                        fig |= {"copy_rows_per_s": copy,
                                "ratio_to_copy": fig["burst_rows_per_s"] / copy}
                log(f"{kind}: COPY {copy:,.0f} rows/s")
        await watch_conn.close()
        await activity.conn.close()
        out["checks"] = await verify(pool, fleet, targets)
        for w in running:
            w.stop()  # the trace's last lines are written as it stops
        traces = {name: read_trace(w.work / "trace.jsonl") for name, w in workers.items()}
        for figures in phases.values():
            paced: Tracked = figures.pop("_paced")
            trace = traces[figures["trial"]]
            figures["anatomy"] = anatomy(paced, trace, activity, figures.pop("_checkpoints"))
            figures["timeline"] = timeline(paced, trace)
        out |= {"phases": phases, "problems": problems}
    finally:
        for w in workers.values():
            w.stop()
        broker.stop()
        await pool.close()
    return out


async def _phases(cfg: Config, fleet: Fleet, activity: ServerActivity, label: str, make: Any,
                  devices: list[Any], problems: dict[str, dict[str, int]], log: Any,
                  rate: float | None, table: str) -> dict[str, Any]:
    """The burst, then at once the paced phase at half its rate (or at ``rate``);
    ``table`` is the target written."""
    fig: dict[str, Any] = {}
    activity.start()
    burst_began = time.monotonic()
    burst = await fleet.flood(make, cycle(devices, cfg.burst), cfg.devices * cfg.burst)
    await fleet.drain(burst)
    await activity.stop()
    if bad := not_materialized(burst):
        problems[f"burst {label}"] = bad
    span = max(burst.seen.values()) - min(burst.published.values())
    rows = sum(burst.rows.values())
    fig |= {"burst_batches": len(burst.published), "burst_s": span,
            "burst_rows_per_s": rows / span}
    rate = rate or 0.5 * len(burst.published) / span
    log(f"{label} burst: {rows:,} rows in {span:.1f}s, {rows / span:,.0f} rows/s; paced at "
        f"{rate:.0f} batches/s")
    fig["burst_profile"] = burst_profile(burst, activity, activity.checkpoints(burst_began))
    log(f"{label} burst: {fig['burst_profile']}")
    fleet.watcher.interval = 0.005
    wal = WalByRelation(activity.conn) if cfg.wal_detail else None
    if wal is not None:
        await wal.begin()
    buffers = BufferReads(activity.conn)
    await buffers.begin()
    activity.start()
    since = time.monotonic()
    # What the bench holds (every batch sent, 100,000s of objects) out of its collector's
    # sight: a full collection stalls this process, the watcher with it, and each batch
    # committed meanwhile would be seen that much late (as in bench_fanin's windows).
    gc.freeze()
    with bench_pauses() as pauses:
        paced = await fleet.paced(make, cycle(devices, 0), rate, cfg.paced_s)
    fig["bench_gc"] = {"collections": len(pauses), "max_ms": round(max(pauses, default=0), 1)}
    await activity.stop()
    fleet.watcher.interval = 0.02
    if wal is not None:
        fig["wal"] = await wal.end(len(paced.published))
        log(f"{label} paced: WAL {fig['wal']}")
    fig["buffers"] = await buffers.end(len(paced.published), table)
    log(f"{label} paced: buffers {fig['buffers']}")
    if bad := not_materialized(paced):
        problems[f"paced {label}"] = bad
    lat = [paced.seen[b] - paced.published[b] for b in paced.seen]
    fig |= {"paced_batches_per_s": rate, "paced_samples": len(lat),
            "paced_p50_ms": ms(pct(lat, 0.5)), "paced_p99_ms": ms(pct(lat, 0.99)),
            "paced_max_ms": ms(max(lat)), "_paced": paced,
            "_checkpoints": activity.checkpoints(since)}
    log(f"{label} paced: p50 {fig['paced_p50_ms']:.1f} ms, p99 {fig['paced_p99_ms']:.1f} ms, "
        f"max {fig['paced_max_ms']:.1f} ms")
    return fig


# ------------------------------------------------------------------ output

def report(results: dict[str, Any]) -> str:
    lines = ["", f"{results['config']['devices']:,} devices, first batches "
                 f"{results['first_batches_per_s']:.0f}/s",
             "pipeline (trial)     burst rows/s   COPY rows/s  ratio  paced/s  p50     p99     max",
             ]
    for kind, f in results["phases"].items():
        lines.append(f"{kind:<20} {f['burst_rows_per_s']:12,.0f} {f['copy_rows_per_s']:13,.0f}"
                     f"  {f['ratio_to_copy']:5.2f}  {f['paced_batches_per_s']:7.0f}  "
                     f"{f['paced_p50_ms']:6.1f}  "
                     f"{f['paced_p99_ms']:6.1f}  {f['paced_max_ms']:6.1f}")
    for kind, f in results["phases"].items():
        lines.append(f"{kind}: burst {f.get('burst_profile')}")
    for kind, f in results["phases"].items():
        a = f["anatomy"]
        lines.append(f"{kind}: anatomy (mean ms; checkpoints during the paced phase: "
                     f"{a.get('checkpoints')})")
        names = [k for k in a.get("middle", {}) if k != "batches"]
        for label in ("middle", "slowest_1pct"):
            if label in a:
                lines.append(f"  {label:<13} " + "  ".join(f"{k} {a[label][k]}" for k in names))
    lines.append(f"checks: {results['checks']}")
    lines.append(f"problems: {results['problems']}")
    return "\n".join(lines)


@pytest.mark.benchmark(group="outage")
@pytest.mark.timeout(3 * 3600)
def test_ingest_after_an_outage(benchmark: Any) -> None:
    smoke = bool(benchmark.disabled)
    cfg = Config.from_env(smoke)
    results = run_once(benchmark, "outage", lambda log: run(cfg, log))
    benchmark.extra_info.update({k: v for k, v in results.items() if k != "config"})
    print(report(results))
    if path := os.environ.get("EDGESYNC_OUTAGE_JSON"):
        Path(path).write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    # Correctness only (never speed): every batch arrived once and materialized.
    assert results["problems"] == {}, results["problems"]
    c = results["checks"]
    assert c["ledger_rows"] == c["ledger_distinct"] == c["materialized"] == c["batches_sent"], c
    assert c["state_rows"] == c["state_rows_expected"], c
    assert c["telemetry_rows"] == c["telemetry_distinct_rows"] == c["telemetry_rows_expected"], c
    for label, figures in results["phases"].items():  # the trace covers the paced batches
        assert figures["anatomy"].get("middle", {}).get("batches"), (label, figures)
