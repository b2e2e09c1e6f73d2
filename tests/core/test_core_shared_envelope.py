"""``_core.Envelope``: RowBatch and TelemetryBatch read their envelope through one base
class (one set of getters in Rust and in ``_core.pyi``), each adding only its own fields."""

from __future__ import annotations

import orjson
import pytest

from edgesync import _core

BATCH_ID = "019693e0-7c4a-7b2e-9a1d-3f5e6d7c8b9a"
EPOCH = "019693d0-0000-7000-8000-000000000001"
SHARED = ("format_version", "capture_strategy", "batch_id", "source_table", "schema_hash",
          "schema_columns_json", "payload_size", "row_count")


def _row_batch() -> _core.RowBatch:
    schema_hash, _ = _core.schema_fingerprint("t", [("id", "INTEGER", 1, False)])
    return _core.decode_row_batch(orjson.dumps({
        "format_version": 1, "capture_strategy": _core.ROW_CAPTURE_STRATEGY,
        "batch_id": BATCH_ID, "journal_epoch": EPOCH, "source_table": "t",
        "schema_hash": schema_hash, "first_commit_seq": 1, "last_commit_seq": 2,
        "rows": [{"commit_seq": 1, "op": "insert", "pk": {"id": 1}, "row": {"id": 1}},
                 {"commit_seq": 2, "op": "delete", "pk": {"id": 1}, "row": None}]}))


def _telemetry_batch() -> _core.TelemetryBatch:
    schema_hash, _ = _core.schema_fingerprint("temps", [("ts", "TEXT", 0, True)])
    return _core.decode_telemetry_batch(orjson.dumps({
        "format_version": 1, "capture_strategy": _core.TELEMETRY_CAPTURE_STRATEGY,
        "batch_id": BATCH_ID, "batch_seq": 7, "source_table": "temps",
        "schema_hash": schema_hash, "cursor_start_ts": "2026-04-28T09:00:00Z",
        "cursor_end_ts": "2026-04-28T09:00:00Z", "row_count": 1,
        "rows": [{"ts": "2026-04-28T09:00:00Z", "fields": {"v": 1}}]}))


def test_both_batches_are_envelopes_with_the_getters_defined_once() -> None:
    for cls in (_core.RowBatch, _core.TelemetryBatch):
        assert cls.__mro__[1] is _core.Envelope
        assert not set(SHARED) & set(vars(cls)), f"{cls.__name__} redefines a shared getter"
    assert set(SHARED) <= set(vars(_core.Envelope))


def test_shared_getters_read_each_kind() -> None:
    rows, telemetry = _row_batch(), _telemetry_batch()
    assert (rows.batch_id, rows.source_table, rows.row_count, rows.format_version) == (
        BATCH_ID, "t", 2, 1)
    assert rows.capture_strategy == "sqlite_row_batch_v1"
    assert (rows.journal_epoch, rows.first_commit_seq, rows.last_commit_seq) == (EPOCH, 1, 2)
    assert (telemetry.batch_id, telemetry.source_table, telemetry.row_count) == (
        BATCH_ID, "temps", 1)
    assert telemetry.capture_strategy == "sqlite_telemetry_batch_v1"
    assert (telemetry.batch_seq, telemetry.cursor_start_ts) == (7, "2026-04-28T09:00:00Z")
    assert rows.schema_columns_json is None and telemetry.payload_size > 0
    assert repr(rows).startswith("RowBatch(") and repr(telemetry).startswith("TelemetryBatch(")


def test_envelope_cannot_be_made_from_python() -> None:
    with pytest.raises(TypeError):
        _core.Envelope()  # type: ignore[call-arg]
