"""Hot paths of the Rust core against the same work in plain Python, side by side.

The decode groups time decoding + validating a batch against ``orjson.loads`` of the
same bytes (parsing alone into Python objects, no validation): batches of 2,000 rows
of 10 mixed fields, shaped like those of ``bench_ingest.py``."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest

from edgesync import _core
from edgesync.protocol import uuid7

COLUMNS = [("id", "INTEGER", 1, True), ("name", "TEXT", 0, False), ("score", "REAL", 0, False),
           ("count", "INTEGER", 0, False), ("note", "TEXT", 0, False)]
PG = [("id", "bigint"), ("name", "text"), ("score", "double precision"), ("count", "bigint"),
      ("note", "text")]


def make_batch(n: int = 2000) -> bytes:
    schema_hash, canonical = _core.schema_fingerprint("bench", COLUMNS)
    rows = [{"commit_seq": i + 1, "op": "update" if i % 2 else "insert", "pk": {"id": i},
             "row": {"id": i, "name": f"name {i}", "score": i * 0.5, "count": i * 3,
                     "note": "tab\there" if i % 10 == 0 else "plain"}} for i in range(n)]
    return orjson.dumps({
        "format_version": 1, "capture_strategy": "sqlite_row_batch_v1", "batch_id": uuid7(),
        "journal_epoch": uuid7(), "source_table": "bench", "schema_hash": schema_hash,
        "schema_columns": orjson.loads(canonical), "first_commit_seq": 1,
        "last_commit_seq": n, "rows": rows})


PAYLOAD = make_batch()

# The 10 mixed columns of bench_ingest.py: integers, reals, text, a 0/1 flag.
WIDE = [("id", "INTEGER", 1, True), ("seq", "INTEGER", 0, False),
        ("temp", "REAL", 0, False), ("humidity", "REAL", 0, False),
        ("pressure", "REAL", 0, False), ("status", "TEXT", 0, False),
        ("label", "TEXT", 0, False), ("count", "INTEGER", 0, False),
        ("ok", "INTEGER", 0, False), ("note", "TEXT", 0, False)]


def wide_fields(i: int) -> dict[str, Any]:
    return {"id": i, "seq": i * 7, "temp": 20 + (i % 97) / 8, "humidity": (i % 50) * 1.5,
            "pressure": 1013.25 - (i % 13) / 4, "status": ("ok", "warn", "fault")[i % 3],
            "label": f"sensor-{i % 40:03d}", "count": i % 1000, "ok": i % 2,
            "note": f"reading {i}, east wing, bay {i % 5}"}


def make_telemetry_batch(n: int = 2000) -> bytes:
    schema_hash, canonical = _core.schema_fingerprint("bench_ts", WIDE)
    t0 = datetime(2026, 4, 28, tzinfo=UTC)
    stamps = [(t0 + timedelta(seconds=i)).isoformat().replace("+00:00", "Z") for i in range(n)]
    return orjson.dumps({
        "format_version": 1, "capture_strategy": "sqlite_telemetry_batch_v1",
        "batch_id": uuid7(), "batch_seq": 1, "source_table": "bench_ts",
        "schema_hash": schema_hash, "schema_columns": orjson.loads(canonical),
        "cursor_start_ts": stamps[0], "cursor_end_ts": stamps[-1], "row_count": n,
        "rows": [{"ts": t, "row_id": uuid7(), "fields": wide_fields(i)}
                 for i, t in enumerate(stamps)]})


def make_wide_row_batch(n: int = 2000) -> bytes:
    schema_hash, canonical = _core.schema_fingerprint("bench_wide", WIDE)
    rows = [{"commit_seq": i + 1, "op": "update" if i % 2 else "insert", "pk": {"id": i},
             "row": wide_fields(i)} for i in range(n)]
    return orjson.dumps({
        "format_version": 1, "capture_strategy": "sqlite_row_batch_v1", "batch_id": uuid7(),
        "journal_epoch": uuid7(), "source_table": "bench_wide", "schema_hash": schema_hash,
        "schema_columns": orjson.loads(canonical), "first_commit_seq": 1,
        "last_commit_seq": n, "rows": rows})


TELEMETRY = make_telemetry_batch()
WIDE_ROWS = make_wide_row_batch()


def python_path(payload: bytes) -> list[tuple[Any, ...]]:
    """The same decode + pk hash + record building in plain Python (the baseline)."""
    doc = orjson.loads(payload)
    out = []
    for r in doc["rows"]:
        pk = hashlib.sha256(orjson.dumps(r["pk"], option=orjson.OPT_SORT_KEYS)).hexdigest()
        row = r["row"] or r["pk"]
        out.append((pk, doc["journal_epoch"], r["commit_seq"], r["op"] == "delete",
                    *(row.get(c) for c, _ in PG)))
    return out


def rust_path(payload: bytes) -> bytes:
    return _core.decode_row_batch(payload).encode_state_copy(PG)


@pytest.mark.benchmark(group="decode+encode 2000 rows")
def test_rust_decode_and_copy(benchmark: Any) -> None:
    assert benchmark(rust_path, PAYLOAD).count(b"\n") == 2000


@pytest.mark.benchmark(group="decode+encode 2000 rows")
def test_python_decode_and_records(benchmark: Any) -> None:
    assert len(benchmark(python_path, PAYLOAD)) == 2000


@pytest.mark.benchmark(group="blob")
def test_zstd_blob_round_trip(benchmark: Any) -> None:
    assert benchmark(lambda: _core.decompress_blob(_core.compress_blob(PAYLOAD))) == PAYLOAD


@pytest.mark.benchmark(group="fingerprint")
def test_fingerprint(benchmark: Any) -> None:
    assert len(benchmark(_core.schema_fingerprint, "bench", COLUMNS)[0]) == 64


@pytest.mark.benchmark(group="decode telemetry 2000x10")
def test_rust_decode_telemetry(benchmark: Any) -> None:
    assert benchmark(_core.decode_telemetry_batch, TELEMETRY).row_count == 2000


@pytest.mark.benchmark(group="decode telemetry 2000x10")
def test_orjson_loads_telemetry(benchmark: Any) -> None:
    assert len(benchmark(orjson.loads, TELEMETRY)["rows"]) == 2000


@pytest.mark.benchmark(group="decode rows 2000x10")
def test_rust_decode_rows(benchmark: Any) -> None:
    assert benchmark(_core.decode_row_batch, WIDE_ROWS).row_count == 2000


@pytest.mark.benchmark(group="decode rows 2000x10")
def test_orjson_loads_rows(benchmark: Any) -> None:
    assert len(benchmark(orjson.loads, WIDE_ROWS)["rows"]) == 2000
