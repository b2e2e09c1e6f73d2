"""COPY binary and COPY text land the same values in PostgreSQL, for every column type
and awkward value; a telemetry column whose type was altered in the target gets text
(which PostgreSQL converts) instead of binary bytes meant for another type."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import orjson
import pytest

from edgesync import _core
from edgesync.errors import BatchRejected, SchemaError
from edgesync.materialize import MirrorColumn, TsTarget, quote_ident
from edgesync.materialize._types import copy_stream
from edgesync.protocol import uuid7

TYPES = [("n", "bigint"), ("f", "double precision"), ("t", "text"), ("b", "bytea"),
         ("j", "jsonb"), ("ok", "boolean")]
VALUES: list[dict[str, Any]] = [
    {"n": 9223372036854775807, "f": 0.1, "t": "tab\there \\ \u00e9\U0001F600",
     "b": {"$blob": "00ff10"}, "j": {"k": [1, "x\ny"], "z": None}, "ok": True},
    {"n": -9223372036854775808, "f": 1e300, "t": "", "b": "plain\n", "j": "s", "ok": 0},
    {"n": 3.0, "f": -0.0, "t": 12, "b": {"$blob": ""}, "j": [], "ok": 1},
    {"n": None, "f": 7, "t": 1.5, "b": None, "j": None, "ok": False},
    {"t": True},
]


def row_batch() -> _core.RowBatch:
    rows: list[dict[str, Any]] = [
        {"commit_seq": i + 1, "op": "insert", "pk": {"id": i}, "row": {"id": i, **v}}
        for i, v in enumerate(VALUES)]
    rows.append({"commit_seq": len(rows) + 1, "op": "delete", "pk": {"id": 0}})
    return _core.decode_row_batch(orjson.dumps({
        "format_version": 1, "capture_strategy": "sqlite_row_batch_v1",
        "batch_id": uuid7(), "journal_epoch": uuid7(), "source_table": "kinds",
        "schema_hash": "0" * 64, "first_commit_seq": 1, "last_commit_seq": len(rows),
        "rows": rows}))


def telemetry_batch(fields: list[dict[str, Any]]) -> _core.TelemetryBatch:
    stamps = [f"2026-04-28T09:00:0{i}.123456789+02:00" for i in range(len(fields))]
    rows = [{"ts": ts, "row_id": uuid7() if i % 2 else None, "fields": f}
            for i, (ts, f) in enumerate(zip(stamps, fields, strict=True))]
    for r in rows:
        if r["row_id"] is None:
            del r["row_id"]
    return _core.decode_telemetry_batch(orjson.dumps({
        "format_version": 1, "capture_strategy": "sqlite_telemetry_batch_v1",
        "batch_id": uuid7(), "batch_seq": 1, "source_table": "kinds", "schema_hash": "0" * 64,
        "cursor_start_ts": stamps[0], "cursor_end_ts": stamps[-1], "row_count": len(rows),
        "rows": rows}))


async def copy_both(conn: asyncpg.Connection, ddl: str, text: bytes, binary: bytes,
                    order: str) -> list[list[tuple[Any, ...]]]:
    out = []
    for fmt, data in (("text", text), ("binary", binary)):
        name = f"copy_{fmt}_{uuid.uuid4().hex[:8]}"
        await conn.execute(f"CREATE TEMP TABLE {name} ({ddl})")
        await conn.copy_to_table(name, source=memoryview(data),  # type: ignore[arg-type]
                                 format=fmt)
        out.append([tuple(r) for r in await conn.fetch(f"SELECT * FROM {name} ORDER BY {order}")])
    return out


async def test_state_rows_are_the_same_in_both_formats(pool: asyncpg.Pool) -> None:
    batch = row_batch()
    cols = ", ".join(f"{n} {t}" for n, t in TYPES)
    async with pool.acquire() as conn:
        text, binary = await copy_both(
            conn, f"h text, e uuid, s bigint, d boolean, {cols}",
            batch.encode_state_copy(TYPES), batch.encode_state_copy(TYPES, binary=True), "s")
    assert text == binary
    assert len(binary) == len(VALUES) + 1
    assert binary[0][4:] == (9223372036854775807, 0.1, "tab\there \\ \u00e9\U0001F600",
                             b"\x00\xff\x10", {"k": [1, "x\ny"], "z": None}, True)
    assert binary[2][4] == 3 and binary[2][6] == "12" and binary[3][6] == "1.5"
    assert binary[4][6] == "true" and binary[-1][3] is True


async def test_telemetry_rows_are_the_same_in_both_formats(pool: asyncpg.Pool) -> None:
    batch = telemetry_batch(VALUES)
    device = str(uuid.uuid4())
    cols = ", ".join(f"{n} {t}" for n, t in TYPES)
    async with pool.acquire() as conn:
        text, binary = await copy_both(
            conn, f"device_id uuid, event_ts timestamptz, row_id uuid, {cols}",
            batch.encode_telemetry_copy(TYPES, device_id=device),
            batch.encode_telemetry_copy(TYPES, device_id=device, binary=True), "event_ts")
    assert text == binary
    assert binary[0][1].microsecond == 123456 and binary[0][1].utcoffset().total_seconds() == 0
    assert {str(r[0]) for r in binary} == {device}


@pytest.mark.parametrize("fmt", ["text", "binary"])
async def test_many_batches_stream_as_one_copy_in_bounded_chunks(pool: asyncpg.Pool,
                                                               fmt: str) -> None:
    """``copy_stream``: the batches' COPY parts (one header and one trailer in binary) go
    in chunks of about the chunk size, a part never split, never joined into one buffer;
    PostgreSQL reads the same rows as from the batches one by one."""
    binary = fmt == "binary"
    parts = [row_batch().encode_state_copy(TYPES, binary=binary) for _ in range(40)]
    largest = max(len(p) for p in parts)
    chunks = [c async for c in copy_stream(parts, fmt, chunk_bytes=3 * largest)]
    assert len(chunks) > 4
    assert all(len(c) < 4 * largest for c in chunks)
    ddl = "h text, e uuid, s bigint, d boolean, " + ", ".join(f"{n} {t}" for n, t in TYPES)
    async with pool.acquire() as conn:
        streamed, apart = (f"copy_{w}_{uuid.uuid4().hex[:8]}" for w in ("streamed", "apart"))
        for name in (streamed, apart):
            await conn.execute(f"CREATE TEMP TABLE {name} ({ddl})")
        await conn.copy_to_table(streamed, format=fmt,
                                 source=copy_stream(parts, fmt, chunk_bytes=3 * largest))
        for part in parts:
            await conn.copy_to_table(apart, source=memoryview(part),  # type: ignore[arg-type]
                                     format=fmt)
        got = [await conn.fetch(f"SELECT * FROM {name} ORDER BY e, s") for name in (streamed,
                                                                                  apart)]
    assert len(got[0]) == 40 * (len(VALUES) + 1)
    assert [tuple(r) for r in got[0]] == [tuple(r) for r in got[1]]


def test_numeric_needs_text_and_mismatches_name_the_field() -> None:
    batch = row_batch()
    with pytest.raises(SchemaError, match="numeric"):
        batch.encode_state_copy([("n", "numeric")], binary=True)
    with pytest.raises(BatchRejected) as err:
        batch.encode_state_copy([("t", "bigint")], binary=True)
    assert err.value.code == "value_type_mismatch" and err.value.field == "rows[0].row.t"
    with pytest.raises(ValueError, match="device_id"):
        telemetry_batch([{"n": 1}]).encode_telemetry_copy([("n", "bigint")], device_id="x",
                                                           binary=True)


async def test_altered_telemetry_column_gets_text(pool: asyncpg.Pool, unique: str) -> None:
    table = f"edge_ts_copy_{unique}"
    mirrors = [MirrorColumn("n", "n", "bigint", "bigint"), MirrorColumn("t", "t", "text", "text")]
    batch = telemetry_batch([{"n": 4242, "t": "a"}, {"n": -1, "t": "b"}])
    device = uuid.uuid4()
    async with pool.acquire() as conn, conn.transaction():
        await TsTarget(table, mirrors).provision(conn)
        # An operator changes a column's type behind the bindings' back.
        await conn.execute(f"ALTER TABLE {quote_ident(table)} ALTER COLUMN n TYPE text")
        stale = [MirrorColumn("n", "n", "bigint", "text"), mirrors[1]]
        await TsTarget(table, stale).apply(conn, device, batch)
        rows = await conn.fetch(f"SELECT n, t FROM {quote_ident(table)} ORDER BY event_ts")
    assert [tuple(r) for r in rows] == [("4242", "a"), ("-1", "b")]
