"""The ingest path end to end on a real PostgreSQL, each figure measured side by side
with its reference in one run (interleaved batch by batch, so drift hits both):

* telemetry append through ``IngestPipeline.handle`` vs a plain COPY of the same rows
  from a file into an identical (partitioned, indexed) table — the ceiling;
* state upserts (50% updates) through the pipeline vs COPY into a temp table plus one
  ``INSERT … ON CONFLICT DO UPDATE`` of the same rows;
* a redelivery storm (every batch again) vs the fresh-batch rate;
* state batches into a target that already holds 100k rows of the device vs into a
  nearly empty one;
* the pipeline vs the same work in plain Python (orjson + asyncpg
  ``copy_records_to_table``).

Measure: ``pytest benches/bench_ingest.py --benchmark-only -s -p no:cacheprovider``
(prints a table; figures also land in the benchmark JSON ``extra_info``). Under
``--benchmark-disable`` it runs once on a few small batches as a smoke. Results and
their reading: docs/benchmarks.md. The database (``EDGESYNC_TEST_DATABASE_URL``, by
default the local PostgreSQL) gets a scratch database that is dropped afterwards.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import orjson
import pytest

from edgesync import _core, fleet, governance
from edgesync.ingest import IngestPipeline, OutcomeStatus, Replayer
from edgesync.materialize import quote_ident
from edgesync.store import create_pool, migrate

BASE_DB = os.environ.get("EDGESYNC_TEST_DATABASE_URL",
                         "postgresql://postgres@127.0.0.1:5432/postgres")
T0 = datetime(2026, 4, 28, 0, 0, tzinfo=UTC)
# 10 mixed columns: integers, reals, text, a 0/1 flag.
COLUMNS = [("id", "INTEGER", 1, True), ("seq", "INTEGER", 0, False),
           ("temp", "REAL", 0, False), ("humidity", "REAL", 0, False),
           ("pressure", "REAL", 0, False), ("status", "TEXT", 0, False),
           ("label", "TEXT", 0, False), ("count", "INTEGER", 0, False),
           ("ok", "INTEGER", 0, False), ("note", "TEXT", 0, False)]
PG_TYPES = {"INTEGER": "bigint", "REAL": "double precision", "TEXT": "text"}
ROWS_PER_BATCH = 2000
# Rows already in the target of the second state device (the table-size figure).
BIG_STATE = 100_000
# Every batch is sent again this many times (the redelivery storm).
STORMS = 3


def uuid7(ms: int | None = None) -> str:
    ms = time.time_ns() // 1_000_000 if ms is None else ms
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms << 80) | (0x7 << 76) | ((rand >> 62) & 0xFFF) << 64 | (0b10 << 62) | (
        rand & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


def fields(i: int) -> dict[str, Any]:
    return {"id": i, "seq": i * 7, "temp": 20 + (i % 97) / 8, "humidity": (i % 50) * 1.5,
            "pressure": 1013.25 - (i % 13) / 4, "status": ("ok", "warn", "fault")[i % 3],
            "label": f"sensor-{i % 40:03d}", "count": i % 1000, "ok": i % 2,
            "note": f"reading {i}, east wing, bay {i % 5}"}


def rfc3339(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def telemetry_batches(n_batches: int, rows: int, table: str) -> list[bytes]:
    schema_hash, canonical = _core.schema_fingerprint(table, COLUMNS)
    out = []
    for b in range(n_batches):
        stamps = [T0 + timedelta(seconds=b * rows + i) for i in range(rows)]
        doc = {"format_version": 1, "capture_strategy": "sqlite_telemetry_batch_v1",
               "batch_id": uuid7(), "batch_seq": b + 1, "source_table": table,
               "schema_hash": schema_hash, "schema_columns": orjson.loads(canonical),
               "cursor_start_ts": rfc3339(stamps[0]), "cursor_end_ts": rfc3339(stamps[-1]),
               "row_count": rows,
               "rows": [{"ts": rfc3339(t), "row_id": uuid7(), "fields": fields(b * rows + i)}
                        for i, t in enumerate(stamps)]}
        out.append(orjson.dumps(doc))
    return out


def row_batches(n_batches: int, rows: int, table: str) -> list[bytes]:
    """Batch k updates the last half of batch k-1's keys and inserts as many new ones."""
    schema_hash, canonical = _core.schema_fingerprint(table, COLUMNS)
    epoch, seq, out = uuid7(), 0, []
    for b in range(n_batches):
        base = b * rows // 2
        ops = []
        for i in range(rows):
            seq += 1
            key = base + i
            f = fields(key) | {"seq": seq}
            ops.append({"commit_seq": seq, "op": "update" if b and i < rows // 2 else "insert",
                        "pk": {"id": key}, "row": f})
        out.append(orjson.dumps({
            "format_version": 1, "capture_strategy": "sqlite_row_batch_v1",
            "batch_id": uuid7(), "journal_epoch": epoch, "source_table": table,
            "schema_hash": schema_hash, "schema_columns": orjson.loads(canonical),
            "first_commit_seq": ops[0]["commit_seq"], "last_commit_seq": seq, "rows": ops}))
    return out


@dataclass
class Timer:
    """Seconds per batch for each side, interleaved batch by batch. Figures use the
    median batch, which a neighbour's burst on a shared machine does not move."""

    samples: dict[str, list[float]] = field(default_factory=dict)

    async def time(self, name: str, work: Awaitable[Any]) -> Any:
        start = time.perf_counter()
        result = await work
        self.samples.setdefault(name, []).append(time.perf_counter() - start)
        return result

    def median(self, name: str) -> float:
        return statistics.median(self.samples[name])


async def approve_first(pool: asyncpg.Pool, pipe: IngestPipeline, topic: str,
                        payload: bytes) -> str:
    out = await pipe.handle(topic, payload)
    assert out.lineage_id is not None, out
    async with pool.acquire() as conn:
        (review,) = [r for r in await governance.list_reviews(conn, status="queued")
                     if r.lineage_id == out.lineage_id]
        claimed = await governance.claim_review(conn, review.id, actor="bench",
                                                action_version=review.action_version)
        await governance.approve_review(conn, review.id, actor="bench",
                                        action_version=claimed.action_version,
                                        column_actions=None)
    await Replayer(pool).drain_pending()
    table: str = await pool.fetchval(
        "SELECT target_table FROM edge_table_lineages WHERE id = $1", out.lineage_id)
    return table


async def clone_table(conn: asyncpg.Connection, source: str, name: str) -> None:
    """An identical empty table: same columns, partitions (bounds), default, indexes."""
    q, src = quote_ident(name), quote_ident(source)
    key = await conn.fetchval("SELECT pg_get_partkeydef($1::regclass)", src)
    if key is None:
        await conn.execute(f"CREATE TABLE {q} (LIKE {src} INCLUDING ALL)")
        # LIKE copies no storage parameters (the state tables' fillfactor).
        options = await conn.fetchval("SELECT reloptions FROM pg_class WHERE oid = $1::regclass",
                                      src)
        if options:
            await conn.execute(f"ALTER TABLE {q} SET ({', '.join(options)})")
        return
    await conn.execute(f"CREATE TABLE {q} (LIKE {src} INCLUDING DEFAULTS) PARTITION BY {key}")
    parts = await conn.fetch(
        "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) AS bound FROM pg_inherits i "
        "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = $1::regclass", src)
    for i, p in enumerate(parts):
        await conn.execute(f"CREATE TABLE {quote_ident(f'{name}_p{i}')} PARTITION OF {q} "
                           f"{p['bound']}")
    await conn.execute(f"CREATE INDEX ON {q} (device_id, event_ts)")


async def bench_telemetry(pool: asyncpg.Pool, scope: fleet.DeviceScope,
                          n_batches: int, rows: int) -> dict[str, float]:
    pipe = IngestPipeline(pool)
    topic = f"{scope.root_topic}/sync/telemetry/batch"
    warm, *batches = telemetry_batches(n_batches + 1, rows, "tele")
    table = await approve_first(pool, pipe, topic, warm)
    mirrors = [(c[0], PG_TYPES[c[1]]) for c in COLUMNS]
    cols = ["device_id", "event_ts", "row_id", *(c for c, _ in mirrors)]
    async with pool.acquire() as conn:
        # The days ahead exist for both sides (the pipeline creates them on its first
        # batch of a day; that DDL is not what is measured here).
        last = T0 + timedelta(seconds=(n_batches + 1) * rows)
        from edgesync.materialize import TsTarget
        async with conn.transaction():
            await TsTarget(table, []).ensure_partitions(conn, T0, last)
        await clone_table(conn, table, "bench_ts_ceiling")
        await clone_table(conn, table, "bench_ts_python")
    files = []
    for p in batches:
        b = _core.decode_telemetry_batch(p)
        fd, path = tempfile.mkstemp(suffix=".copy")
        with os.fdopen(fd, "wb") as fh:
            fh.write(b.encode_telemetry_copy(mirrors, device_id=str(scope.device_id)))
        files.append(path)
    timer = Timer()

    async def python_path(payload: bytes) -> None:
        doc = orjson.loads(payload)
        records = []
        for r in doc["rows"]:
            f = r["fields"]
            records.append((scope.device_id, datetime.fromisoformat(r["ts"]),
                            uuid.UUID(r["row_id"]), *(f.get(c) for c, _ in mirrors)))
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO edge_export_segments (device_id, batch_id, topic_kind, "
                "source_table, outcome, batch_seq, row_count, payload_bytes) "
                "VALUES ($1, $2, 'bench', 'bench_py', 'materialized', $3, $4, $5)",
                scope.device_id, uuid.uuid4(), doc["batch_seq"],
                len(records), len(payload))
            await conn.copy_records_to_table("bench_ts_python", records=records, columns=cols)

    async def ceiling(path: str) -> None:
        async with pool.acquire() as conn:
            await conn.copy_to_table("bench_ts_ceiling", source=path, columns=cols,
                                     format="text")

    try:
        for p, path in zip(batches, files, strict=True):
            out = await timer.time("pipeline", pipe.handle(topic, p))
            assert out.status is OutcomeStatus.MATERIALIZED, out
            await timer.time("ceiling", ceiling(path))
            await timer.time("python", python_path(p))
        for _ in range(STORMS):
            for p in batches:
                out = await timer.time("redelivery", pipe.handle(topic, p))
                assert out.status is OutcomeStatus.DUPLICATE, out
    finally:
        for path in files:
            os.unlink(path)
    m = timer.median
    return {
        "telemetry_rows_per_s": rows / m("pipeline"),
        "telemetry_ceiling_rows_per_s": rows / m("ceiling"),
        "telemetry_ratio_to_ceiling": m("ceiling") / m("pipeline"),
        "telemetry_python_rows_per_s": rows / m("python"),
        "telemetry_speedup_vs_python": m("python") / m("pipeline"),
        "telemetry_redelivered_batches_per_s": 1 / m("redelivery"),
        "telemetry_redelivery_speedup": m("pipeline") / m("redelivery"),
    }


async def bench_state(pool: asyncpg.Pool, scope: fleet.DeviceScope,
                      n_batches: int, rows: int) -> dict[str, float]:
    pipe = IngestPipeline(pool)
    topic = f"{scope.root_topic}/sync/rows/batch"
    warm, *batches = row_batches(n_batches + 1, rows, "state")
    table = await approve_first(pool, pipe, topic, warm)
    mirrors = [(c[0], PG_TYPES[c[1]]) for c in COLUMNS]
    names = [c for c, _ in mirrors]
    # A second device whose target already holds BIG_STATE rows: its batches should cost
    # what the first device's do (the upsert probes keys; it never reads all the rows).
    async with pool.acquire() as conn:
        big = await fleet.add_device(conn, project="bench", name="bench-gw-big",
                                     topic_slug="bench")
    big_topic = f"{big.root_topic}/sync/rows/batch"
    big_warm, *big_batches = row_batches(n_batches + 1, rows, "state")
    big_table = await approve_first(pool, pipe, big_topic, big_warm)
    async with pool.acquire() as conn:
        await conn.execute(
            f"INSERT INTO {quote_ident(big_table)} (device_id, _edge_pk_hash, "
            "_edge_journal_epoch, _edge_commit_seq, id, note) "
            "SELECT $1, md5(g::text) || md5((-g)::text), $2, 0, -g, 'older row' "
            "FROM generate_series(1, $3) g", big.device_id, uuid.uuid4(), BIG_STATE)
        await conn.execute(f"ANALYZE {quote_ident(big_table)}")
        for clone in ("bench_state_plain", "bench_state_python", "bench_state_floor"):
            await clone_table(conn, table, clone)
            await conn.execute(f"INSERT INTO {clone} SELECT * FROM {quote_ident(table)}")
    copies = [_core.decode_row_batch(p).encode_state_copy(mirrors) for p in batches]
    binaries = [_core.decode_row_batch(p).encode_state_copy(mirrors, binary=True) for p in batches]
    tmp_cols = ", ".join(f"{quote_ident(c)} {t}" for c, t in mirrors)
    set_list = ", ".join(f"{quote_ident(c)} = EXCLUDED.{quote_ident(c)}" for c in
                         ["_edge_journal_epoch", "_edge_commit_seq", "_edge_deleted", *names])
    insert_cols = ", ".join(["device_id", "_edge_pk_hash", "_edge_journal_epoch",
                             "_edge_commit_seq", "_edge_deleted", *map(quote_ident, names)])
    select_cols = ", ".join(["$1::uuid", "_edge_pk_hash", "_edge_epoch", "_edge_seq",
                             "_edge_deleted", *map(quote_ident, names)])

    async def upsert(conn: asyncpg.Connection, target: str, fill: Callable[[], Awaitable[Any]],
                     *, as_pipeline: bool) -> None:
        """The reference: COPY into a temp table, one INSERT … ON CONFLICT DO UPDATE. With
        ``as_pipeline``, what ``StateTarget.apply`` runs for a live batch of distinct keys
        (the Python side checks that itself): its kept staging table, applied only when
        newer."""
        ddl = (f"(_edge_pk_hash text, _edge_epoch uuid, _edge_seq bigint, _edge_deleted "
               f"boolean, {tmp_cols})")
        source = "bench_in_kept" if as_pipeline else "bench_in"
        if as_pipeline:  # StateTarget's staging table: kept per connection
            await conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {source} {ddl} "
                               "ON COMMIT DELETE ROWS")
        else:
            await conn.execute(f"CREATE TEMP TABLE {source} {ddl} ON COMMIT DROP")
        await fill()
        newer = (", _edge_synced_at = now() WHERE (t._edge_journal_epoch, t._edge_commit_seq) "
                 "< (EXCLUDED._edge_journal_epoch, EXCLUDED._edge_commit_seq)")
        await conn.execute(
            f"INSERT INTO {target} AS t ({insert_cols}) SELECT {select_cols} FROM {source} "
            f"ON CONFLICT (device_id, _edge_pk_hash) DO UPDATE SET {set_list}"
            f"{newer if as_pipeline else ''}", scope.device_id)

    async def plain(copy: bytes) -> None:
        async with pool.acquire() as conn, conn.transaction():
            await upsert(conn, "bench_state_plain", lambda: conn.copy_to_table(
                "bench_in", source=memoryview(copy), format="text"),  # type: ignore[arg-type]
                as_pipeline=False)

    async def python_path(payload: bytes) -> None:
        doc = orjson.loads(payload)
        epoch = uuid.UUID(doc["journal_epoch"])
        records = []
        for r in doc["rows"]:
            pk = hashlib.sha256(orjson.dumps(r["pk"], option=orjson.OPT_SORT_KEYS)).hexdigest()
            row = r["row"] or r["pk"]
            records.append((pk, epoch, r["commit_seq"], r["op"] == "delete",
                            *(row.get(c) for c in names)))
        # One INSERT … ON CONFLICT may not touch a row twice: keys must be distinct.
        assert len({rec[0] for rec in records}) == len(records)
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO edge_export_segments (device_id, batch_id, topic_kind, "
                "source_table, outcome, row_count, payload_bytes) "
                "VALUES ($1, $2, 'bench', 'bench_py', 'materialized', $3, $4)",
                scope.device_id, uuid.uuid4(), len(records), len(payload))
            await upsert(conn, "bench_state_python",
                         lambda: conn.copy_records_to_table("bench_in_kept", records=records),
                         as_pipeline=True)

    async def sql_floor(binary: bytes, payload: bytes) -> None:
        """The Python path's statements with the client's work already done (the COPY
        bytes made beforehand): what no client-side speed-up can go below."""
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO edge_export_segments (device_id, batch_id, topic_kind, "
                "source_table, outcome, row_count, payload_bytes) "
                "VALUES ($1, $2, 'bench', 'bench_floor', 'materialized', $3, $4)",
                scope.device_id, uuid.uuid4(), rows, len(payload))
            await upsert(conn, "bench_state_floor", lambda: conn.copy_to_table(
                "bench_in_kept", source=memoryview(binary),  # type: ignore[arg-type]
                format="binary"), as_pipeline=True)

    timer = Timer()
    for p, copy, binary, p_big in zip(batches, copies, binaries, big_batches, strict=True):
        out = await timer.time("pipeline", pipe.handle(topic, p))
        assert out.status is OutcomeStatus.MATERIALIZED, out
        out = await timer.time("pipeline_big", pipe.handle(big_topic, p_big))
        assert out.status is OutcomeStatus.MATERIALIZED, out
        await timer.time("plain", plain(copy))
        await timer.time("python", python_path(p))
        await timer.time("floor", sql_floor(binary, p))
    for _ in range(STORMS):
        for p in batches:
            out = await timer.time("redelivery", pipe.handle(topic, p))
            assert out.status is OutcomeStatus.DUPLICATE, out
    m = timer.median
    return {
        "state_rows_per_s": rows / m("pipeline"),
        "state_plain_rows_per_s": rows / m("plain"),
        "state_ratio_to_plain": m("plain") / m("pipeline"),
        "state_python_rows_per_s": rows / m("python"),
        "state_speedup_vs_python": m("python") / m("pipeline"),
        # The most any client could gain over the Python path: its SQL alone.
        "state_python_over_sql_floor": m("python") / m("floor"),
        # A batch into a target already holding BIG_STATE rows of the device, over one
        # into a nearly empty target: about 1 when the cost does not grow with the table.
        "state_big_table_cost_ratio": m("pipeline_big") / m("pipeline"),
        "state_redelivered_batches_per_s": 1 / m("redelivery"),
        "state_redelivery_speedup": m("pipeline") / m("redelivery"),
    }


async def run_all(n_batches: int, rows: int) -> dict[str, float]:
    name = f"edgesync_bench_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin = await asyncpg.connect(BASE_DB)
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    head, _, query = BASE_DB.partition("?")
    url = head.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else "")
    pool = await create_pool(url, max_size=4)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            scope = await fleet.add_device(conn, project="bench", name="bench-gw",
                                           topic_slug="bench")
        results = await bench_telemetry(pool, scope, n_batches, rows)
        results |= await bench_state(pool, scope, n_batches, rows)
    finally:
        await pool.close()
        admin = await asyncpg.connect(BASE_DB)
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    return results


def _loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on POSIX
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


@pytest.mark.benchmark(group="ingest")
def test_ingest_side_by_side(benchmark: Any) -> None:
    smoke = bool(benchmark.disabled)
    n_batches = 2 if smoke else int(os.environ.get("EDGESYNC_BENCH_BATCHES", "12"))
    rows = 200 if smoke else ROWS_PER_BATCH
    if not smoke:
        size = len(telemetry_batches(1, rows, "tele")[0])
        assert 400 * 1024 < size <= _core.MAX_BATCH_BYTES, size
    results: dict[str, float] = {}

    def run() -> None:
        with asyncio.Runner(loop_factory=_loop) as runner:
            results.update(runner.run(run_all(n_batches, rows)))

    benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(results)
    width = max(map(len, results))
    print(f"\n{n_batches} batches x {rows} rows, interleaved (median batch):")
    for key, value in results.items():
        print(f"  {key:<{width}}  {value:12,.2f}")
    assert all(v > 0 for v in results.values())
