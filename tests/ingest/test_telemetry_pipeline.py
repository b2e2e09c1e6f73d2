"""The telemetry half of the ingest pipeline against a real PostgreSQL: rejection codes,
batch_seq rules, staging under review, approval + replay, partitions, redelivery."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import asyncpg
import orjson
import pytest
from kits.review_helpers import approve
from kits.telemetry_payloads import T0, Telemetry, rfc3339

from edgesync import _core, fleet, governance
from edgesync.errors import InvalidRequestError
from edgesync.ingest import IngestPipeline, OutcomeStatus, Replayer
from edgesync.materialize import quote_ident
from edgesync.staging import list_staged_rows


@pytest.fixture
async def device(pool: asyncpg.Pool, unique: str) -> fleet.DeviceScope:
    async with pool.acquire() as conn:
        return await fleet.add_device(conn, project=f"tp-{unique}", name=f"tg-{unique}",
                                      topic_slug=f"ts-{unique}")


def topic(scope: fleet.DeviceScope) -> str:
    return f"{scope.root_topic}/sync/telemetry/batch"


async def live(pool: asyncpg.Pool, pipe: IngestPipeline, scope: fleet.DeviceScope,
               tm: Telemetry) -> uuid.UUID:
    """A lineage past review: first batch staged, approved (mirror all), replayed."""
    first = await pipe.handle(topic(scope), tm.payload(tm.rows((T0, 1.0))))
    assert first.lineage_id is not None
    await approve(pool, first.lineage_id)
    await Replayer(pool).drain_pending()
    return first.lineage_id


async def ts_rows(pool: asyncpg.Pool, lineage_id: uuid.UUID) -> list[tuple[Any, ...]]:
    table = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                lineage_id)
    rows = await pool.fetch(f"SELECT event_ts, value_c FROM {quote_ident(table)} "
                            "ORDER BY event_ts, value_c")
    return [tuple(r) for r in rows]


async def test_stage_under_review_then_approve_replay_and_live(pool, device):
    pipe = IngestPipeline(pool)
    tm = Telemetry()
    out = await pipe.handle(topic(device), tm.payload(tm.rows((T0, 20.5), (T0 + timedelta(
        seconds=1), None))))
    assert (out.status, out.code, out.rows) == (OutcomeStatus.STAGED, "schema_review", 2)
    lineage = await pool.fetchrow("SELECT * FROM edge_table_lineages WHERE id = $1",
                                  out.lineage_id)
    assert (lineage["pipeline"], lineage["status"], lineage["pause_reason"]) == (
        "telemetry", "paused", "schema_review")
    staged = await pool.fetchrow("SELECT * FROM edge_staged_rows WHERE lineage_id = $1",
                                 out.lineage_id)
    assert (staged["pipeline"], staged["batch_seq"], staged["row_count"]) == ("telemetry", 1, 2)
    assert (staged["first_event_ts"], staged["last_event_ts"]) == (T0, T0 + timedelta(seconds=1))
    async with pool.acquire() as conn:
        readable = await list_staged_rows(conn, out.lineage_id)
    assert [r.doc["fields"]["value_c"] for r in readable] == [20.5, None]

    # Still under review: more batches stage, never lost.
    out2 = await pipe.handle(topic(device), tm.payload(tm.rows((T0 + timedelta(days=1), 3.0))))
    assert (out2.status, out2.code) == (OutcomeStatus.STAGED, "schema_review")

    await approve(pool, out.lineage_id)
    assert await Replayer(pool).drain_pending(project_id=device.project_id) == 3
    lineage = await pool.fetchrow("SELECT * FROM edge_table_lineages WHERE id = $1",
                                  out.lineage_id)
    table = f"edge_ts_p{device.project_id.hex[:8]}_temps"
    assert lineage["target_table"] == table
    assert (lineage["status"], lineage["staged_rows"], lineage["materialized_rows"]) == (
        "active", 0, 3)
    assert await ts_rows(pool, out.lineage_id) == [
        (T0, 20.5), (T0 + timedelta(seconds=1), None), (T0 + timedelta(days=1), 3.0)]

    # Live: appended directly.
    out3 = await pipe.handle(topic(device), tm.payload(tm.rows((T0 + timedelta(hours=1), 7.0))))
    assert (out3.status, out3.rows) == (OutcomeStatus.MATERIALIZED, 1)
    row = await pool.fetchrow(f"SELECT * FROM {quote_ident(table)} WHERE value_c = 7.0")
    assert row["device_id"] == device.device_id and row["sensor"] == "s1"
    assert isinstance(row["row_id"], uuid.UUID)

    # Daily partitions for the batches' days (and the day after), a DEFAULT, an index.
    parts = {r["c"] for r in await pool.fetch(
        "SELECT c.relname AS c FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = $1::regclass", table)}
    assert {f"{table}_d20260428", f"{table}_d20260429", f"{table}_d20260430",
            f"{table}_default"} <= parts
    indexes = await pool.fetch("SELECT indexdef FROM pg_indexes WHERE tablename = $1", table)
    assert any("(device_id, event_ts)" in r["indexdef"] for r in indexes)
    assert await pool.fetchval(
        "SELECT batch_seq FROM edge_export_segments WHERE device_id = $1 AND outcome = "
        "'materialized' ORDER BY id DESC LIMIT 1", device.device_id) == 3


async def test_batch_seq_rules_and_redelivery(pool, device):
    pipe = IngestPipeline(pool)
    tm = Telemetry()
    lineage_id = await live(pool, pipe, device, tm)
    p2 = tm.payload(tm.rows((T0 + timedelta(minutes=2), 2.0)))
    assert (await pipe.handle(topic(device), p2)).status is OutcomeStatus.MATERIALIZED
    # Redelivery of the same batch: a no-op, acknowledged.
    again = await pipe.handle(topic(device), p2)
    assert again.status is OutcomeStatus.DUPLICATE
    # A new batch_id with an accepted batch_seq, then with a lower one.
    dup = await pipe.handle(topic(device), tm.payload(tm.rows((T0, 9.0)), seq=2))
    assert (dup.status, dup.code) == (OutcomeStatus.REJECTED, "duplicate_batch_seq")
    stale = await pipe.handle(topic(device), tm.payload(tm.rows((T0, 9.0)), seq=1))
    assert (stale.status, stale.code) == (OutcomeStatus.REJECTED, "duplicate_batch_seq")
    p5 = tm.payload(tm.rows((T0 + timedelta(minutes=5), 5.0)), seq=5)
    assert (await pipe.handle(topic(device), p5)).status is OutcomeStatus.MATERIALIZED
    # Out of order: 4 arrives after 5 was accepted (group commit, retries and several
    # workers commit out of order): accepted, never lost (docs/protocol.md).
    late = await pipe.handle(topic(device), tm.payload(tm.rows((T0 + timedelta(minutes=4),
                                                                4.0)), seq=4))
    assert late.status is OutcomeStatus.MATERIALIZED
    # ...and 5 redelivered after that is still just a duplicate.
    assert (await pipe.handle(topic(device), p5)).status is OutcomeStatus.DUPLICATE

    assert await ts_rows(pool, lineage_id) == [
        (T0, 1.0), (T0 + timedelta(minutes=2), 2.0), (T0 + timedelta(minutes=4), 4.0),
        (T0 + timedelta(minutes=5), 5.0)]
    ledger = await pool.fetch(
        "SELECT outcome, rejection_code, batch_seq FROM edge_export_segments "
        "WHERE device_id = $1 ORDER BY id", device.device_id)
    assert [(r["outcome"], r["rejection_code"]) for r in ledger] == [
        ("staged", None), ("materialized", None), ("rejected", "duplicate_batch_seq"),
        ("rejected", "duplicate_batch_seq"), ("materialized", None),
        ("materialized", None)]
    assert [r["batch_seq"] for r in ledger if r["outcome"] != "rejected"] == [1, 2, 5, 4]
    lineage = await pool.fetchrow("SELECT * FROM edge_table_lineages WHERE id = $1", lineage_id)
    assert (lineage["rejected_batches"], lineage["materialized_rows"]) == (2, 4)


async def test_shuffled_redelivery_of_accepted_batches_changes_nothing(pool, device):
    pipe = IngestPipeline(pool)
    tm = Telemetry()
    lineage_id = await live(pool, pipe, device, tm)
    payloads = [tm.payload(tm.rows(*[(T0 + timedelta(seconds=10 * i + j), float(i))
                                     for j in range(3)]))
                for i in range(1, 5)]
    for p in payloads:
        assert (await pipe.handle(topic(device), p)).status is OutcomeStatus.MATERIALIZED
    before = await ts_rows(pool, lineage_id)
    for p in [payloads[2], payloads[0], payloads[3], payloads[1], payloads[2]]:
        assert (await pipe.handle(topic(device), p)).status is OutcomeStatus.DUPLICATE
    assert await ts_rows(pool, lineage_id) == before and len(before) == 13


async def test_every_rejection_code_is_recorded(pool, device):
    pipe = IngestPipeline(pool)
    tm = Telemetry()
    rows = tm.rows((T0, 1.0), (T0 + timedelta(seconds=5), 2.0))
    good = orjson.loads(tm.payload(rows, seq=1))

    def variant(**change: Any) -> bytes:
        doc = {**good, **change}
        return orjson.dumps({k: v for k, v in doc.items() if v is not ...})

    bad_row = [{**rows[0], "ts": "yesterday"}, rows[1]]
    cases = {
        "payload_too_large": orjson.dumps(good) + b" " * _core.MAX_BATCH_BYTES,
        "malformed_json": b"{oops",
        "invalid_number_encoding": orjson.dumps(good).replace(b"2.0", b"1e999"),
        "envelope_unstripped_tenant_fields": variant(org_id="o"),
        "invalid_format_version": variant(format_version=0),
        "unsupported_format_version": variant(format_version=3),
        "unsupported_capture_strategy": variant(capture_strategy="sqlite_row_batch_v1"),
        "invalid_batch_id": variant(batch_id=str(uuid.uuid4())),
        "invalid_batch_seq": variant(batch_seq=0),
        "invalid_source_table": variant(source_table=""),
        "invalid_schema_hash": variant(schema_hash="abc"),
        "invalid_rows": variant(rows={}),
        "batch_too_many_rows": variant(rows=[rows[0]] * 4097, row_count=4097),
        "row_count_mismatch": variant(row_count=3),
        "invalid_row": variant(rows=bad_row),
        "invalid_row_id": variant(rows=[{**rows[0], "row_id": "nope"}, rows[1]]),
        "cursor_timestamp_mismatch": variant(cursor_end_ts=rfc3339(T0 + timedelta(seconds=6))),
        "invalid_schema_columns": variant(schema_columns={"table_name": "temps", "columns": 1}),
        "schema_hash_mismatch": variant(schema_hash="0" * 64),
    }
    for code, payload in cases.items():
        out = await pipe.handle(topic(device), payload)
        assert (out.status, out.code) == (OutcomeStatus.REJECTED, code), out.detail
    recorded = await pool.fetch(
        "SELECT rejection_code, topic_kind FROM edge_export_segments WHERE device_id = $1 "
        "AND outcome = 'rejected' ORDER BY id", device.device_id)
    assert [r["rejection_code"] for r in recorded] == list(cases)
    assert {r["topic_kind"] for r in recorded} == {"sync/telemetry/batch"}
    # A corrected resend of a rejected batch_id is accepted.
    assert (await pipe.handle(topic(device), orjson.dumps(good))).status is OutcomeStatus.STAGED


async def test_wide_batch_lands_in_default_then_moves_to_its_partition(pool, device):
    pipe = IngestPipeline(pool)
    tm = Telemetry()
    lineage_id = await live(pool, pipe, device, tm)
    far = T0 + timedelta(days=20)
    wide = await pipe.handle(topic(device), tm.payload(tm.rows(
        (T0, 2.0), (T0 + timedelta(days=10), 3.0), (far, 4.0))))
    assert wide.status is OutcomeStatus.MATERIALIZED
    table = f"edge_ts_p{device.project_id.hex[:8]}_temps"
    assert await pool.fetchval(f"SELECT count(*) FROM {quote_ident(table + '_default')}") == 1
    # A later batch for that middle day creates its partition and takes the stray row.
    mid = await pipe.handle(topic(device), tm.payload(tm.rows((T0 + timedelta(days=10,
                                                                              hours=1), 5.0))))
    assert mid.status is OutcomeStatus.MATERIALIZED
    assert await pool.fetchval(f"SELECT count(*) FROM {quote_ident(table + '_default')}") == 0
    assert await pool.fetchval(
        f"SELECT count(*) FROM {quote_ident(table + '_d20260508')}") == 2
    assert len(await ts_rows(pool, lineage_id)) == 5


async def test_value_that_does_not_fit_is_quarantined_and_reserved_names_refused(pool, device):
    pipe = IngestPipeline(pool)
    tm = Telemetry()
    first = await pipe.handle(topic(device), tm.payload(tm.rows((T0, 1.0))))
    assert first.lineage_id is not None
    with pytest.raises(InvalidRequestError, match="reserved"):
        await approve(pool, first.lineage_id, [
            {"source_column_name": "ts", "action": "mirror", "mirror_column_name": "event_ts"},
            {"source_column_name": "value_c", "action": "mirror"},
            {"source_column_name": "sensor", "action": "ignore"}])
    async with pool.acquire() as conn:
        (review,) = [r for r in await governance.list_reviews(conn, status="in_review")
                     if r.lineage_id == first.lineage_id]
        await governance.approve_review(conn, review.id, actor="t",
                                        action_version=review.action_version,
                                        column_actions=[
            {"source_column_name": "ts", "action": "ignore"},
            {"source_column_name": "value_c", "action": "mirror"},
            {"source_column_name": "sensor", "action": "ignore"}])
    await Replayer(pool).drain_pending()
    bad = tm.rows((T0, 1.0))
    bad[0]["fields"]["value_c"] = "warm"
    out = await pipe.handle(topic(device), tm.payload(bad))
    # The row is quarantined (its batch settles, with nothing else to write); the breaker
    # does not count a row's data.
    assert (out.status, out.rows) == (OutcomeStatus.MATERIALIZED, 0)
    lineage = await pool.fetchrow("SELECT * FROM edge_table_lineages WHERE id = $1",
                                  first.lineage_id)
    assert lineage["materialization_errors"] == 0
    q = await pool.fetchrow("SELECT * FROM edge_quarantined_rows WHERE lineage_id = $1",
                            first.lineage_id)
    assert (q["pipeline"], q["reason_code"], q["reason_field"]) == (
        "telemetry", "value_type_mismatch", "rows[0].fields.value_c")
    assert q["event_ts"] == T0 and q["batch_seq"] is not None and q["pk_hash"] is None
    assert await ts_rows(pool, first.lineage_id) == [(T0, 1.0)]


async def test_two_devices_share_the_project_target(pool, device, unique):
    pipe = IngestPipeline(pool)
    async with pool.acquire() as conn:
        other = await fleet.add_device(conn, project=f"tp-{unique}", name=f"tg2-{unique}",
                                       topic_slug=f"ts-{unique}")
    a = await live(pool, pipe, device, Telemetry())
    b = await live(pool, pipe, other, Telemetry())
    tables = await pool.fetch("SELECT target_table FROM edge_table_lineages WHERE id = ANY($1)",
                              [a, b])
    assert len({r["target_table"] for r in tables}) == 1
    devices = await pool.fetchval(
        f"SELECT count(DISTINCT device_id) FROM {quote_ident(tables[0]['target_table'])}")
    assert devices == 2
