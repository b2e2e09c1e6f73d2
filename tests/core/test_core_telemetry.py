"""edgesync._core: telemetry batch decoding, rejection codes and COPY encoding."""

from __future__ import annotations

import contextlib
import copy
import json
import random
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from edgesync import _core
from edgesync.errors import BatchRejected, SchemaError

BATCH_ID = "019693e0-7c4a-7b2e-9a1d-3f5e6d7c8b9a"
ROW_ID = "019693E0-0000-7000-8000-00000000000A"
COLUMNS = [("ts", "TEXT", 0, True), ("value_c", "REAL", 0, False)]
SCHEMA_HASH, SCHEMA_JSON = _core.schema_fingerprint("temps", COLUMNS)


def valid() -> dict[str, Any]:
    return {
        "format_version": 1,
        "capture_strategy": "sqlite_telemetry_batch_v1",
        "batch_id": BATCH_ID,
        "batch_seq": 42,
        "source_table": "temps",
        "schema_hash": SCHEMA_HASH,
        "schema_columns": json.loads(SCHEMA_JSON),
        "cursor_start_ts": "2026-04-28T09:00:00Z",
        "cursor_end_ts": "2026-04-28T11:00:10+02:00",
        "row_count": 3,
        "rows": [
            {"ts": "2026-04-28T09:00:01Z", "row_id": ROW_ID, "fields": {"value_c": 22.1}},
            {"ts": "2026-04-28T09:00:00Z", "fields": {"value_c": None, "note": "a\tb"}},
            {"ts": "2026-04-28T09:00:10.000Z", "row_id": None, "fields": {}},
        ],
    }


def mutated(change: Callable[[dict[str, Any]], object]) -> bytes:
    p = copy.deepcopy(valid())
    change(p)
    return json.dumps(p).encode()


def rejected(payload: bytes) -> BatchRejected:
    with pytest.raises(BatchRejected) as exc:
        _core.decode_telemetry_batch(payload)
    return exc.value


def test_valid_batch() -> None:
    b = _core.decode_telemetry_batch(json.dumps(valid()).encode())
    assert (b.batch_id, b.batch_seq, b.source_table, b.row_count) == (BATCH_ID, 42, "temps", 3)
    assert (b.format_version, b.capture_strategy) == (1, "sqlite_telemetry_batch_v1")
    assert b.schema_hash == SCHEMA_HASH and b.schema_columns_json == SCHEMA_JSON.encode()
    assert b.cursor_end_ts == "2026-04-28T11:00:10+02:00"
    assert datetime.fromisoformat(b.first_event_ts) == datetime(2026, 4, 28, 9, tzinfo=UTC)
    assert datetime.fromisoformat(b.last_event_ts) == datetime(2026, 4, 28, 9, 0, 10, tzinfo=UTC)
    assert b.field_names() == ["value_c", "note"]
    assert b.payload_size == len(json.dumps(valid()).encode())
    assert "batch_seq=42" in repr(b)


def test_encode_copy() -> None:
    b = _core.decode_telemetry_batch(memoryview(json.dumps(valid()).encode()))
    out = b.encode_telemetry_copy([("value_c", "double precision"), ("note", "text")])
    rid = ROW_ID.lower()
    assert out.decode().splitlines() == [
        f"2026-04-28 09:00:01.000000+00\t{rid}\t22.1\t\\N",
        "2026-04-28 09:00:00.000000+00\t\\N\t\\N\ta\\tb",
        "2026-04-28 09:00:10.000000+00\t\\N\t\\N\t\\N",
    ]
    dev = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
    assert b.encode_telemetry_copy([], device_id=dev).startswith(dev.encode() + b"\t2026-")
    with pytest.raises(ValueError, match="device_id"):
        b.encode_telemetry_copy([], device_id="x\tinjected")
    with pytest.raises(SchemaError):
        b.encode_telemetry_copy([("note", "int4")])
    with pytest.raises(BatchRejected) as exc:
        b.encode_telemetry_copy([("note", "bigint")])
    assert (exc.value.code, exc.value.field) == ("value_type_mismatch", "rows[1].fields.note")


CASES: list[tuple[str, str, Callable[[dict[str, Any]], object]]] = [
    ("envelope_unstripped_tenant_fields", "fleet_id", lambda p: p.update(fleet_id="f")),
    ("invalid_format_version", "format_version", lambda p: p.pop("format_version")),
    ("unsupported_format_version", "format_version", lambda p: p.update(format_version=2)),
    ("unsupported_capture_strategy", "capture_strategy",
     lambda p: p.update(capture_strategy="sqlite_row_batch_v1")),
    ("invalid_batch_id", "batch_id",
     lambda p: p.update(batch_id="019693e0-7c4a-4b2e-9a1d-3f5e6d7c8b9a")),
    ("invalid_batch_seq", "batch_seq", lambda p: p.update(batch_seq=0)),
    ("invalid_batch_seq", "batch_seq", lambda p: p.update(batch_seq="7")),
    ("invalid_batch_seq", "batch_seq", lambda p: p.pop("batch_seq")),
    ("invalid_source_table", "source_table", lambda p: p.update(source_table="")),
    ("invalid_schema_hash", "schema_hash", lambda p: p.update(schema_hash=SCHEMA_HASH.upper())),
    ("invalid_rows", "rows", lambda p: p.update(rows=[])),
    ("batch_too_many_rows", "rows",
     lambda p: p.update(rows=[{"ts": "2026-04-28T09:00:00Z", "fields": {}}] * 4097)),
    ("row_count_mismatch", "row_count", lambda p: p.update(row_count=2)),
    ("row_count_mismatch", "row_count", lambda p: p.pop("row_count")),
    ("invalid_row", "rows[1].ts", lambda p: p["rows"][1].update(ts="2026-04-28 09:00:00")),
    ("invalid_row", "rows[1].fields", lambda p: p["rows"][1].update(fields=[1])),
    ("invalid_row", "rows[2]", lambda p: p["rows"].__setitem__(2, "x")),
    ("invalid_row_id", "rows[0].row_id", lambda p: p["rows"][0].update(row_id="not-a-uuid")),
    ("invalid_row_id", "rows[0].row_id", lambda p: p["rows"][0].update(row_id=7)),
    ("cursor_timestamp_mismatch", "cursor_start_ts",
     lambda p: p.update(cursor_start_ts="2026-04-28T09:00:00.5Z")),
    ("cursor_timestamp_mismatch", "cursor_end_ts", lambda p: p.pop("cursor_end_ts")),
    ("invalid_schema_columns", "schema_columns.table_name",
     lambda p: p["schema_columns"].update(table_name="x")),
    ("schema_hash_mismatch", "schema_hash",
     lambda p: p["schema_columns"]["columns"][1].update(not_null=True)),
]


@pytest.mark.parametrize(("code", "field", "change"), CASES,
                         ids=[f"{c}-{f}-{i}" for i, (c, f, _) in enumerate(CASES)])
def test_rejection_codes(code: str, field: str, change: Callable[[dict[str, Any]], object]
                         ) -> None:
    rej = rejected(mutated(change))
    assert (rej.code, rej.field) == (code, field), rej.detail


def test_payload_level_codes() -> None:
    good = json.dumps(valid()).encode()
    assert rejected(good + b" " * (_core.MAX_BATCH_BYTES + 1 - len(good))).code == (
        "payload_too_large")
    assert rejected(b"{nope").code == "malformed_json"
    assert rejected(b'"text"').code == "malformed_json"
    assert rejected(good.replace(b"22.1", b"NaN")).code == "invalid_number_encoding"
    assert rejected(good.replace(b"22.1", b"-1e400")).code == "invalid_number_encoding"


def test_cursor_compares_instants_and_row_id_null_is_absent() -> None:
    b = _core.decode_telemetry_batch(mutated(
        lambda p: p.update(cursor_start_ts="2026-04-28T04:00:00.000-05:00")))
    assert b.cursor_start_ts == "2026-04-28T04:00:00.000-05:00"


def test_never_raises_anything_but_batch_rejected() -> None:
    good = json.dumps(valid()).encode()
    rng = random.Random(7)
    for _ in range(2000):
        p = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(p))
            p[i] = rng.choice(b'{}[]":,0123456789.eE+-TZ \\\x00\xff')
        with contextlib.suppress(BatchRejected):
            _core.decode_telemetry_batch(bytes(p))
