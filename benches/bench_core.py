"""Hot paths of the Rust core against the same work in plain Python, side by side."""

from __future__ import annotations

import hashlib
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
