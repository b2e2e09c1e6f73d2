"""Bytes on the wire per row, plain JSON vs compressed batches (docs/protocol.md,
"Compressed batches"), and what compressing costs the agent and the worker in CPU.

Batches are built by the agent's own capture code (triggers, journal, ``Batcher``;
``TelemetryCapture``) from a real SQLite database, 50 rows a batch as in the fan-in
benchmark, for two data sets:

* **fan-in**: the fan-in benchmark's 10 columns (``bench_ingest.fields``; values repeat
  with small periods), state rows half updates, and the same columns as telemetry;
* **realistic**: ``benches/data/wire_realistic.json`` (``wire_data.py``: UUID keys, free
  text, noisy floats at full precision, millisecond timestamps, inserts/updates/deletes;
  24 noisy sensors).

Figures, side by side in one run:

* bytes per row: plain, a zstd frame (level 3, as the agent sends it), and a zstd frame
  with a dictionary per table (trained on the first half's rows, measured on the second
  half); target: compressed ≤ 0.3x plain on the realistic set; the dictionary is kept
  only if it saves ≥ 20 % more than the frame alone;
* the agent's CPU per row: building the batches (journal read, JSON, state.db) alone vs
  with the frame (``time.process_time``, best of 3 rounds, alternating);
* the worker's CPU per row at the fan-in shape: ``IngestPipeline.handle`` of the same
  batches, plain to one device and as frames to another, interleaved batch by batch on a
  scratch database (this process's CPU: decoding, inflating, asyncpg; PostgreSQL's own
  work is the same for both and not in it); target ≤ 1.1x plain.

Run: ``pytest benches/bench_wire.py --benchmark-only -s -p no:cacheprovider``. Under
``--benchmark-disable`` (CI's smoke) it builds a few batches of each and checks that a
frame is smaller than its JSON and ingests to the same rows. Figures: docs/benchmarks.md,
"Wire".
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard
from bench_ingest import BASE_DB, COLUMNS, approve_first, fields
from fanin_kit import scratch_database
from wire_data import PATH as REALISTIC

import edgesync.fleet
from edgesync import _core
from edgesync.agent._state import StateStore
from edgesync.agent.capture._batcher import Batcher
from edgesync.agent.capture._discovery import discover, read_table, telemetry_table
from edgesync.agent.capture._telemetry import TelemetryCapture
from edgesync.agent.capture._telemetry_state import TelemetryState
from edgesync.agent.capture._triggers import install_triggers
from edgesync.agent.config import ReplicationConfig
from edgesync.ingest import IngestPipeline, OutcomeStatus
from edgesync.protocol import TableStrategy, TopicKind, topic_for
from edgesync.store import create_pool, migrate

ROWS = 50
LEVEL = 3
DICT_BYTES = 16 * 1024
FANIN_BATCHES = 40

_FANIN_DDL = ("CREATE TABLE fanin_state (" + ", ".join(
    f"{n} {t}{' PRIMARY KEY' if pk else ''}" for n, t, pk, _ in COLUMNS) + ")")
_FANIN_TELE_DDL = ("CREATE TABLE fanin_tele (ts TEXT NOT NULL, " + ", ".join(
    f"{n} {t}" for n, t, _, _ in COLUMNS) + ")")


@dataclass
class DataSet:
    name: str
    state_ddl: str
    telemetry_ddl: str
    # Each step is the writes between two batches: (sql, params) statements.
    state_steps: list[list[tuple[str, tuple[Any, ...]]]]
    telemetry_steps: list[list[tuple[str, tuple[Any, ...]]]]


def _upsert_sql(table: str, row: dict[str, Any], op: str) -> tuple[str, tuple[Any, ...]]:
    cols = list(row)
    if op == "insert":
        return (f"INSERT INTO {table} ({', '.join(cols)}) VALUES "
                f"({', '.join('?' * len(cols))})", tuple(row.values()))
    if op == "update":
        sets = ", ".join(f"{c} = ?" for c in cols[1:])
        return (f"UPDATE {table} SET {sets} WHERE {cols[0]} = ?",
                (*[row[c] for c in cols[1:]], row[cols[0]]))
    return f"DELETE FROM {table} WHERE {cols[0]} = ?", (row[cols[0]],)


def _chunks(items: list[Any], n: int) -> list[list[Any]]:
    return [items[i:i + n] for i in range(0, len(items), n)]


def fanin_set(batches: int) -> DataSet:
    state: list[list[tuple[str, tuple[Any, ...]]]] = []
    for k in range(batches):
        base = k * ROWS // 2
        state.append([_upsert_sql("fanin_state", fields(base + i),
                                  "update" if k and i < ROWS // 2 else "insert")
                      for i in range(ROWS)])
    tele = [[(f"INSERT INTO fanin_tele VALUES (?, {', '.join('?' * len(COLUMNS))})",
              (f"2026-04-28T00:{(k * ROWS + i) // 60 % 60:02d}:{(k * ROWS + i) % 60:02d}Z",
               *fields(k * ROWS + i).values())) for i in range(ROWS)] for k in range(batches)]
    return DataSet("fan-in", _FANIN_DDL, _FANIN_TELE_DDL, state, tele)


def realistic_set(limit: int | None = None) -> DataSet:
    doc = json.loads(REALISTIC.read_text())
    ops = [_upsert_sql("assets", row, op) for op, row in doc["state_ops"]]
    samples = [("INSERT INTO readings VALUES (?, ?, ?, ?, ?)", tuple(s))
               for s in doc["samples"]]
    state, tele = _chunks(ops, ROWS), _chunks(samples, ROWS)
    if limit is not None:
        state, tele = state[:limit], tele[:limit]
    return DataSet("realistic", doc["state_ddl"], doc["telemetry_ddl"], state, tele)


@dataclass
class Built:
    """The payloads the agent built, and the CPU seconds building them took."""

    state: list[bytes]
    telemetry: list[bytes]
    rows: int
    cpu: float


def build(ds: DataSet, folder: Path) -> Built:
    """Writes the data set step by step into a fresh SQLite database and has the agent's
    capture code build a batch after each step (the writes are not in the CPU figure)."""
    folder.mkdir(parents=True)
    source, state_path = folder / "app.db", folder / "state.db"
    db = sqlite3.connect(source, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(ds.state_ddl)
    db.execute(ds.telemetry_ddl)
    tele_name = ds.telemetry_ddl.split()[2]
    replication = ReplicationConfig(
        source_db_path=source, state_db_path=state_path,
        table_strategies={tele_name: TableStrategy(strategy="telemetry", ts_column="ts")})
    store = StateStore(state_path)
    state_info = discover(db, replication).rows
    installed = install_triggers(db, state_info, snapshot=False, known=[])
    store.bind_journal(installed.journal_id)
    for t in state_info:
        store.ensure_table(t.name, *t.fingerprint())
    batcher = Batcher(db, store)
    batcher.set_tables(state_info)
    spec = telemetry_table(read_table(db, tele_name), "ts", None)
    assert not isinstance(spec, str), spec
    tstate = TelemetryState(store)
    capture = TelemetryCapture(db, tstate, 30)
    capture.register(spec, from_start=True)
    out = Built([], [], 0, 0.0)
    try:
        for step, table in [(s, state_info[0].name) for s in ds.state_steps]:
            _write(db, step)
            start = time.process_time()
            batch = batcher.next_batch(table)
            assert batch is not None
            store.confirm(batch.pending)
            out.cpu += time.process_time() - start
            out.state.append(batch.payload)
            out.rows += batch.row_count
        for step in ds.telemetry_steps:
            _write(db, step)
            start = time.process_time()
            tb = capture.next_batch(tele_name)
            assert tb is not None
            tstate.published(tb)
            out.cpu += time.process_time() - start
            out.telemetry.append(tb.payload)
            out.rows += tb.row_count
    finally:
        batcher.close()
        store.close()
        db.close()
    return out


def _write(db: sqlite3.Connection, step: list[tuple[str, tuple[Any, ...]]]) -> None:
    db.execute("BEGIN")
    for sql, params in step:
        db.execute(sql, params)
    db.execute("COMMIT")


def _rows(payload: bytes) -> int:
    return len(orjson.loads(payload)["rows"])


def _row_samples(payloads: list[bytes]) -> list[bytes]:
    """Each batch's rows as separate JSON texts: the dictionary's training samples."""
    return [orjson.dumps(r) for p in payloads for r in orjson.loads(p)["rows"]]


def wire_bytes(payloads: list[bytes]) -> dict[str, float]:
    """Bytes per row of the second half of ``payloads``: plain, framed, framed with a
    dictionary trained on the first half's rows."""
    half = len(payloads) // 2
    train, measured = payloads[:half], payloads[half:]
    rows = sum(_rows(p) for p in measured)
    plain = sum(len(p) for p in measured)
    framed = sum(len(_core.compress_blob(p, LEVEL)) for p in measured)
    trained = zstandard.train_dictionary(DICT_BYTES, _row_samples(train), level=LEVEL)
    with_dict = zstandard.ZstdCompressor(level=LEVEL, dict_data=trained,
                                         write_checksum=True)
    dicted = sum(len(with_dict.compress(p)) for p in measured)
    return {"plain": plain / rows, "zstd": framed / rows, "zstd+dict": dicted / rows,
            "dict_bytes": float(len(trained.as_bytes()))}


def agent_cpu(ds_factory: Callable[[], DataSet], folder: Path, rounds: int
              ) -> dict[str, float]:
    """CPU per row building the batches, and with each batch framed too; best of
    ``rounds``, the two measured in the same round on the same batches."""
    plain, framed = [], []
    for r in range(rounds):
        built = build(ds_factory(), folder / f"round{r}")
        start = time.process_time()
        for p in built.state + built.telemetry:
            _core.compress_blob(p, LEVEL)
        compress = time.process_time() - start
        plain.append(built.cpu / built.rows)
        framed.append((built.cpu + compress) / built.rows)
    return {"plain_us": min(plain) * 1e6, "zstd_us": min(framed) * 1e6}


async def worker_cpu(built: Built) -> dict[str, float]:
    """The pipeline's CPU per row for the same batches, plain to one device and framed to
    another, interleaved batch by batch (first batches approved, not measured)."""
    async with scratch_database(BASE_DB, "edgesync_bench_wire") as url:
        pool = await create_pool(url, max_size=4)
        try:
            async with pool.acquire() as conn:
                await migrate(conn)
                devices = [await edgesync.fleet.add_device(
                    conn, project="wire", name=f"gw-{way}", topic_slug="wire")
                    for way in ("plain", "zstd")]
            pipe = IngestPipeline(pool)
            spent = {"plain": 0.0, "zstd": 0.0}
            rows = 0
            for kind, payloads in ((TopicKind.ROWS_BATCH, built.state),
                                   (TopicKind.TELEMETRY_BATCH, built.telemetry)):
                topics = [topic_for(d.root_topic, kind) for d in devices]
                await approve_first(pool, pipe, topics[0], payloads[0])
                await approve_first(pool, pipe, topics[1],
                                    _core.compress_blob(payloads[0], LEVEL))
                for p in payloads[1:]:
                    rows += _rows(p)
                    for way, topic, wire in (("plain", topics[0], p),
                                             ("zstd", topics[1],
                                              _core.compress_blob(p, LEVEL))):
                        start = time.process_time()
                        out = await pipe.handle(topic, wire)
                        spent[way] += time.process_time() - start
                        assert out.status is OutcomeStatus.MATERIALIZED, out
            counts = [await pool.fetchval(
                "SELECT count(*) FROM edge_export_segments WHERE device_id = $1",
                d.device_id) for d in devices]
            assert counts[0] == counts[1], counts
        finally:
            await pool.close()
    return {"plain_us": spent["plain"] / rows * 1e6, "zstd_us": spent["zstd"] / rows * 1e6}


@pytest.mark.benchmark(group="wire")
def test_wire(benchmark: Any, tmp_path: Path) -> None:
    smoke = bool(benchmark.disabled)
    results: dict[str, float] = {}

    def run() -> None:
        fanin = (lambda: fanin_set(4)) if smoke else (lambda: fanin_set(FANIN_BATCHES))
        real = (lambda: realistic_set(4)) if smoke else realistic_set
        for label, factory in (("fan-in", fanin), ("realistic", real)):
            built = build(factory(), tmp_path / f"{label}-bytes")
            for table, payloads in (("state", built.state), ("telemetry", built.telemetry)):
                if smoke:
                    framed = [_core.compress_blob(p, LEVEL) for p in payloads]
                    assert all(len(f) < len(p) for f, p in zip(framed, payloads, strict=True))
                    continue
                for key, value in wire_bytes(payloads).items():
                    results[f"{label} {table} {key}"] = value
            if not smoke:
                cpu = agent_cpu(factory, tmp_path / f"{label}-cpu", 3)
                results.update({f"{label} agent cpu/row {k}": v for k, v in cpu.items()})
        built = build(fanin(), tmp_path / "worker")
        worker = asyncio.run(worker_cpu(built))
        results.update({f"fan-in worker cpu/row {k}": v for k, v in worker.items()})

    benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(results)
    if smoke:
        return
    print("\nbytes on the wire per row (second half of each set; 50-row batches):")
    print(f"  {'set':<10} {'table':<10} {'plain':>8} {'zstd':>8} {'ratio':>6} "
          f"{'+dict':>8} {'dict saves':>10}")
    for label in ("fan-in", "realistic"):
        for table in ("state", "telemetry"):
            k = f"{label} {table}"
            plain, z, d = (results[f"{k} plain"], results[f"{k} zstd"],
                           results[f"{k} zstd+dict"])
            print(f"  {label:<10} {table:<10} {plain:8.1f} {z:8.1f} {z / plain:6.3f} "
                  f"{d:8.1f} {1 - d / z:10.0%}")
    print("CPU per row, microseconds (best of 3; worker: all batches, interleaved):")
    for who in ("fan-in agent", "realistic agent", "fan-in worker"):
        plain, z = results[f"{who} cpu/row plain_us"], results[f"{who} cpu/row zstd_us"]
        print(f"  {who:<16} plain {plain:7.2f}  zstd {z:7.2f}  ratio {z / plain:5.2f}")
    ratio = statistics.fmean([results["realistic state zstd"] / results["realistic state plain"],
                              results["realistic telemetry zstd"]
                              / results["realistic telemetry plain"]])
    print(f"realistic set, mean ratio {ratio:.3f} (target <= 0.3)")
