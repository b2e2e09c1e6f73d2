"""Hostile text on every device topic: each message a known device sends that cannot be
stored as it is still gets a ledger row whose rejection code says why, and whose detail
holds the offending text escaped (PostgreSQL text cannot hold NUL)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import asyncpg
import orjson
import pytest
from kits.telemetry_payloads import T0, Telemetry

from edgesync import fleet
from edgesync.ingest import IngestPipeline, OutcomeStatus
from edgesync.ingest._ledger import ledger_text


@pytest.fixture
async def device(pool: asyncpg.Pool, unique: str) -> fleet.DeviceScope:
    async with pool.acquire() as conn:
        return await fleet.add_device(conn, project=f"p-{unique}", name=f"gw-{unique}",
                                      topic_slug=f"s-{unique}")


def _hostile_batches(batches: Any) -> dict[str, tuple[str, bytes, str]]:
    """name -> (topic kind, payload, expected rejection code)."""
    f = batches()
    ok_rows = f.rows(("insert", {"id": 1, "mode": "a", "setpoint": 1.0}))
    nul_col = batches(columns=[("id", "INTEGER", 1, True), ("mo\0de", "TEXT", 0, False)])
    nul_table = batches(table="t\0x")
    tele = Telemetry("temps")
    tele_rows = tele.rows((T0, 1.0), (T0 + timedelta(seconds=1), 2.0))
    tele_nul_col = dict(tele.schema_columns)
    tele_nul_col["columns"] = [{**c, "name": "val\0ue"} if c["name"] == "value_c" else c
                               for c in tele.schema_columns["columns"]]
    rows, tel = "sync/rows/batch", "sync/telemetry/batch"
    req, obs = "sync/ingest/request", "sync/schema/observe"
    return {
        "rows: NUL in source_table": (rows, f.payload(ok_rows, source_table="a\0b"),
                                      "invalid_source_table"),
        "rows: NUL in source_table and schema": (
            rows, nul_table.payload(nul_table.rows(
                ("insert", {"id": 1, "mode": "a", "setpoint": 1.0}))), "invalid_source_table"),
        "rows: NUL in a column name": (
            rows, nul_col.payload(nul_col.rows(("insert", {"id": 1, "mo\0de": "x"}))),
            "invalid_schema_columns"),
        "telemetry: NUL in source_table": (tel, tele.payload(tele_rows, source_table="te\0mps"),
                                           "invalid_source_table"),
        "telemetry: NUL in a column name": (
            tel, tele.payload(tele_rows, schema_columns=tele_nul_col), "invalid_schema_columns"),
        "request: NUL in a gap report's table": (req, orjson.dumps(
            {"format_version": 1, "request_kind": "gap_report", "source_table": "a\0b",
             "first_commit_seq": 1, "last_commit_seq": 2}), "invalid_source_table"),
        "request: NUL in url_request's table": (req, orjson.dumps(
            {"format_version": 1, "request_kind": "url_request", "source_table": "a\0b"}),
            "invalid_source_table"),
        "request: NUL in request_kind": (req, orjson.dumps(
            {"format_version": 1, "request_kind": "gap\0", "source_table": "t"}),
            "unsupported_request_kind"),
        "observe: NUL in source_table": (obs, orjson.dumps(
            {"format_version": 1, "source_table": "a\0b", "schema_hash": "0" * 64}),
            "invalid_source_table"),
        "observe: not JSON": (obs, b"\0{", "malformed_json"),
    }


async def test_every_hostile_message_has_a_ledger_row_with_its_code(pool, device, batches):
    pipe = IngestPipeline(pool)
    pipe.upload_base_url = "http://127.0.0.1:9/"
    cases = _hostile_batches(batches)
    for name, (kind, payload, code) in cases.items():
        out = await pipe.handle(f"{device.root_topic}/{kind}", payload)
        assert out.status in (OutcomeStatus.REJECTED, OutcomeStatus.IGNORED), name
        assert out.code == code, (name, out)
    got = await pool.fetch(
        "SELECT topic_kind, rejection_code, rejection_detail, source_table "
        "FROM edge_export_segments WHERE device_id = $1 ORDER BY id", device.device_id)
    assert [(r["topic_kind"], r["rejection_code"]) for r in got] == [
        (kind, code) for kind, _, code in cases.values()]
    # The offending names are in the record, escaped.
    details = "\n".join(r["rejection_detail"] for r in got)
    assert '"a\\0b"' in details and '"mo\\0de"' in details and '"val\\0ue"' in details
    assert {r["source_table"] for r in got if r["source_table"] and "\\0" in r["source_table"]
            } == {"a\\0b", "t\\0x", "te\\0mps"}


async def test_a_gap_reason_with_nul_is_stored_escaped(pool, device):
    out = await IngestPipeline(pool).handle(
        f"{device.root_topic}/sync/ingest/request", orjson.dumps(
            {"format_version": 1, "request_kind": "gap_report", "source_table": "t",
             "first_commit_seq": 1, "last_commit_seq": 2, "reason": "disk\0full"}))
    assert out.status is OutcomeStatus.MATERIALIZED, out
    assert await pool.fetchval("SELECT reason FROM edge_capture_gaps WHERE device_id = $1",
                               device.device_id) == "disk\\0full"


def test_ledger_text_escapes_what_postgresql_refuses():
    assert ledger_text("a\0b\0", 10) == "a\\0b\\0"
    assert ledger_text("x\ud800y", 20) == "x\\ud800y"
    assert ledger_text("é" * 5, 3) == "ééé"


async def test_a_batch_postgresql_cannot_store_even_staged_is_rejected_not_lost(
        pool, device, batches, monkeypatch):
    """The last resort: a valid batch whose text no statement can store (every attempt,
    staged too, raises PostgreSQL's untranslatable-character error) is recorded with
    ``unstorable_text`` rather than left to a log line."""
    import edgesync.ingest._group as group

    async def refuse(conn: Any, works: Any, tail: Any = None) -> None:
        raise asyncpg.UntranslatableCharacterError("unsupported Unicode escape sequence")

    monkeypatch.setattr(group, "accept_group", refuse)
    f = batches()
    out = await IngestPipeline(pool).handle(f"{device.root_topic}/sync/rows/batch", f.payload(
        f.rows(("insert", {"id": 1, "mode": "a", "setpoint": 1.0}))))
    assert (out.status, out.code) == (OutcomeStatus.REJECTED, "unstorable_text")
    row = await pool.fetchrow("SELECT rejection_code, rejection_detail, source_table "
                              "FROM edge_export_segments WHERE device_id = $1", device.device_id)
    assert (row["rejection_code"], row["source_table"]) == ("unstorable_text", "device_state")
    assert "UntranslatableCharacterError" in row["rejection_detail"]
