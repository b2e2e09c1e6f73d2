"""The ingest pipeline as a library, against a real PostgreSQL: dedupe, staging under
review, approval + replay, live materialization, order independence, rejections."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import pytest
from kits.review_helpers import approve, queued_review

from edgesync import fleet, governance
from edgesync.ingest import IngestPipeline, OutcomeStatus, Replayer
from edgesync.materialize import quote_ident
from edgesync.staging import list_staged_rows


@pytest.fixture
async def device(pool: asyncpg.Pool, unique: str) -> fleet.DeviceScope:
    async with pool.acquire() as conn:
        return await fleet.add_device(conn, project=f"p-{unique}", name=f"gw-{unique}",
                                      topic_slug=f"s-{unique}")


def topic(scope: fleet.DeviceScope) -> str:
    return f"{scope.root_topic}/sync/rows/batch"


async def cloud_rows(pool: asyncpg.Pool, lineage_id: uuid.UUID) -> list[tuple[Any, ...]]:
    table = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                lineage_id)
    rows = await pool.fetch(f"SELECT id, mode, setpoint FROM {quote_ident(table)} "
                            "WHERE NOT _edge_deleted ORDER BY id")
    return [tuple(r) for r in rows]


async def test_first_batch_is_staged_under_review_then_replayed(pool, device, batches):
    pipe = IngestPipeline(pool)
    f = batches()
    rows = f.rows(("insert", {"id": 1, "mode": "heat", "setpoint": 20.5}),
                  ("insert", {"id": 2, "mode": "cool", "setpoint": None}))
    out = await pipe.handle(topic(device), f.payload(rows))
    assert out.status is OutcomeStatus.STAGED and out.code == "schema_review"
    lineage = await pool.fetchrow("SELECT * FROM edge_table_lineages WHERE id = $1",
                                  out.lineage_id)
    assert (lineage["status"], lineage["pause_reason"]) == ("paused", "schema_review")
    assert lineage["staged_rows"] == 2
    version = await pool.fetchrow(
        "SELECT classification, status FROM edge_schema_versions WHERE lineage_id = $1",
        out.lineage_id)
    assert tuple(version) == ("ambiguous", "pending")
    async with pool.acquire() as conn:
        staged = await list_staged_rows(conn, out.lineage_id)
    assert [(r.doc["commit_seq"], r.doc["op"], r.staging_reason) for r in staged] == [
        (1, "insert", "schema_review"), (2, "insert", "schema_review")]

    # More batches keep arriving during review: staged, never lost.
    out2 = await pipe.handle(topic(device), f.payload(
        f.rows(("update", {"id": 1, "mode": "off", "setpoint": 19.0})), with_schema=False))
    assert out2.status is OutcomeStatus.STAGED

    approved = await approve(pool, out.lineage_id)
    assert approved.status == "approved"
    # A schema-review pause never reached the device, so approval sends it nothing either.
    assert await pool.fetchval("SELECT count(*) FROM edge_pending_controls WHERE device_id = $1",
                               device.device_id) == 0
    assert await Replayer(pool).drain_pending(project_id=device.project_id) == 3
    assert await cloud_rows(pool, out.lineage_id) == [(1, "off", 19.0), (2, "cool", None)]
    lineage = await pool.fetchrow("SELECT * FROM edge_table_lineages WHERE id = $1",
                                  out.lineage_id)
    assert (lineage["status"], lineage["staged_rows"], lineage["materialized_rows"]) == (
        "active", 0, 3)
    assert lineage["target_table"] == f"edge_state_{device.device_id.hex[:8]}_device_state"

    # Live: update, delete, insert materialize directly.
    out3 = await pipe.handle(topic(device), f.payload(f.rows(
        ("update", {"id": 2, "mode": "cool", "setpoint": 22.0}),
        ("delete", {"id": 1, "mode": None, "setpoint": None}),
        ("insert", {"id": 3, "mode": "fan", "setpoint": 1e-3}))))
    assert out3.status is OutcomeStatus.MATERIALIZED and out3.rows == 3
    assert await cloud_rows(pool, out.lineage_id) == [(2, "cool", 22.0), (3, "fan", 0.001)]


async def test_redelivery_is_a_no_op_and_order_does_not_matter(pool, device, batches):
    pipe = IngestPipeline(pool)
    f = batches()
    first = await pipe.handle(topic(device), f.payload(
        f.rows(("insert", {"id": 1, "mode": "a", "setpoint": 1.0}))))
    await approve(pool, first.lineage_id)
    await Replayer(pool).drain_pending()
    newer_rows = f.rows(("update", {"id": 1, "mode": "newest", "setpoint": 3.0}))
    older_rows = [{**newer_rows[0], "commit_seq": 2,
                   "row": {"id": 1, "mode": "older", "setpoint": 2.0}}]
    newer_rows[0]["commit_seq"] = 3
    newer = f.payload(newer_rows)
    assert (await pipe.handle(topic(device), newer)).status is OutcomeStatus.MATERIALIZED
    # The same batch again (QoS 1 redelivery): acknowledged, nothing written twice.
    again = await pipe.handle(topic(device), newer)
    assert again.status is OutcomeStatus.DUPLICATE
    # An older change arriving late loses against the newer one.
    late = await pipe.handle(topic(device), f.payload(older_rows))
    assert late.status is OutcomeStatus.MATERIALIZED
    assert await cloud_rows(pool, first.lineage_id) == [(1, "newest", 3.0)]
    count = await pool.fetchval(
        "SELECT count(*) FROM edge_export_segments WHERE device_id = $1 AND outcome <> 'rejected'",
        device.device_id)
    assert count == 3


async def test_rejections_are_recorded_with_their_code(pool, device, batches):
    pipe = IngestPipeline(pool)
    f = batches()
    rows = f.rows(("insert", {"id": 1, "mode": "a", "setpoint": 1.0}))
    cases = {
        "invalid_batch_id": f.payload(rows, batch_id=str(uuid.uuid4())),
        "envelope_unstripped_tenant_fields": f.payload(rows, device_id="someone-else"),
        "unsupported_format_version": f.payload(rows, format_version=2),
        "malformed_json": b"{not json",
    }
    for code, payload in cases.items():
        out = await pipe.handle(topic(device), payload)
        assert (out.status, out.code) == (OutcomeStatus.REJECTED, code)
    recorded = await pool.fetch(
        "SELECT rejection_code FROM edge_export_segments WHERE device_id = $1 "
        "AND outcome = 'rejected' ORDER BY id", device.device_id)
    assert [r["rejection_code"] for r in recorded] == list(cases)


async def test_unknown_device_and_bad_topic_are_rejected_and_counted(pool, batches, unique):
    pipe = IngestPipeline(pool)
    f = batches()
    payload = f.payload(f.rows(("insert", {"id": 1, "mode": "a", "setpoint": 1.0})))
    out = await pipe.handle(f"nobody-{unique}/ghost/sync/rows/batch", payload)
    assert (out.status, out.code) == (OutcomeStatus.REJECTED, "unknown_device")
    out = await pipe.handle("x/y/not/a/topic", payload)
    assert (out.status, out.code) == (OutcomeStatus.REJECTED, "invalid_topic")
    assert pipe.counters["unknown_device"] == 1 and pipe.counters["invalid_topic"] == 1


async def test_value_that_does_not_fit_is_quarantined_not_lost(pool, device, batches):
    pipe = IngestPipeline(pool)
    f = batches()
    first = await pipe.handle(topic(device), f.payload(
        f.rows(("insert", {"id": 1, "mode": "a", "setpoint": 1.0}))))
    await approve(pool, first.lineage_id)
    await Replayer(pool).drain_pending()
    bad = await pipe.handle(topic(device), f.payload(
        f.rows(("insert", {"id": 2, "mode": "b", "setpoint": "not a number"}),
               ("insert", {"id": 3, "mode": "c", "setpoint": 3.0}))))
    # The encoder refuses the row before anything is written: that row is quarantined,
    # the other is written, and the breaker does not count a row's data.
    assert (bad.status, bad.rows) == (OutcomeStatus.MATERIALIZED, 1)
    lineage = await pool.fetchrow("SELECT * FROM edge_table_lineages WHERE id = $1",
                                  first.lineage_id)
    assert lineage["materialization_errors"] == 0 and lineage["staged_rows"] == 0
    q = await pool.fetchrow("SELECT reason_code, reason_field, row_json, commit_seq "
                            "FROM edge_quarantined_rows WHERE lineage_id = $1",
                            first.lineage_id)
    assert (q["reason_code"], q["reason_field"]) == ("value_type_mismatch",
                                                     "rows[0].row.setpoint")
    assert '"setpoint":"not a number"' in q["row_json"]
    table = lineage["target_table"]
    assert await pool.fetchval(f"SELECT array_agg(id ORDER BY id) FROM {quote_ident(table)}"
                               ) == [1, 3]


async def test_approval_with_column_actions(pool, device, batches):
    pipe = IngestPipeline(pool)
    f = batches()
    out = await pipe.handle(topic(device), f.payload(
        f.rows(("insert", {"id": 7, "mode": "m", "setpoint": 2.5}))))
    await approve(pool, out.lineage_id, [
        {"source_column_name": "id", "action": "mirror"},
        {"source_column_name": "mode", "action": "mirror", "mirror_column_name": "Mode Name"},
        {"source_column_name": "setpoint", "action": "ignore"},
    ])
    await Replayer(pool).drain_pending()
    table = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                out.lineage_id)
    row = await pool.fetchrow(f'SELECT * FROM {quote_ident(table)}')
    assert row["id"] == 7 and row["Mode Name"] == "m" and "setpoint" not in row


async def test_review_conflicts_and_bad_actions(pool, device, batches):
    from edgesync.errors import ConflictError, InvalidRequestError

    pipe = IngestPipeline(pool)
    f = batches()
    out = await pipe.handle(topic(device), f.payload(
        f.rows(("insert", {"id": 1, "mode": "a", "setpoint": 1.0}))))
    review = await queued_review(pool, out.lineage_id)
    async with pool.acquire() as conn:
        # A queued review's refused approval changes nothing: still queued at 1, unclaimed.
        with pytest.raises(InvalidRequestError, match="setpoint"):
            await governance.approve_review(conn, review.id, actor="t", action_version=1,
                                            column_actions=[
                                                {"source_column_name": "id", "action": "mirror"},
                                                {"source_column_name": "mode", "action": "mirror"},
                                            ])
        still = await governance.get_review(conn, review.id)
        assert (still.status, still.action_version, still.claimed_by) == ("queued", 1, None)
        await governance.claim_review(conn, review.id, actor="t", action_version=1)
        with pytest.raises(ConflictError, match="action_version"):
            await governance.claim_review(conn, review.id, actor="u", action_version=1)
        with pytest.raises(InvalidRequestError, match="setpoint"):
            await governance.approve_review(conn, review.id, actor="t", action_version=2,
                                            column_actions=[
                                                {"source_column_name": "id", "action": "mirror"},
                                                {"source_column_name": "mode", "action": "mirror"},
                                            ])
        with pytest.raises(InvalidRequestError, match="reserved"):
            await governance.approve_review(conn, review.id, actor="t", action_version=2,
                                            column_actions=[
                                                {"source_column_name": "id", "action": "mirror",
                                                 "mirror_column_name": "_edge_pk_hash"},
                                                {"source_column_name": "mode", "action": "ignore"},
                                                {"source_column_name": "setpoint",
                                                 "action": "ignore"},
                                            ])
        # Nothing half-done: still in review, no target, still staged.
        lineage = await conn.fetchrow("SELECT * FROM edge_table_lineages WHERE id = $1",
                                      out.lineage_id)
        assert lineage["target_table"] is None and lineage["staged_rows"] == 1


async def test_only_nullability_changed_is_compatible_mapped_and_continues(pool, device,
                                                                           batches):
    pipe = IngestPipeline(pool)
    f = batches()
    first = await pipe.handle(topic(device), f.payload(
        f.rows(("insert", {"id": 1, "mode": "a", "setpoint": 1.0}))))
    await approve(pool, first.lineage_id)
    await Replayer(pool).drain_pending(project_id=device.project_id)
    f.set_columns([("id", "INTEGER", 1, True), ("mode", "TEXT", 0, True),
                   ("setpoint", "REAL", 0, True)])  # setpoint became NOT NULL
    out = await pipe.handle(topic(device), f.payload(
        f.rows(("update", {"id": 1, "mode": "b", "setpoint": 2.0}))))
    assert out.status is OutcomeStatus.MATERIALIZED
    version = await pool.fetchrow(
        "SELECT classification, status, diff FROM edge_schema_versions "
        "WHERE lineage_id = $1 AND schema_hash = $2", first.lineage_id, f.schema_hash)
    assert (version["classification"], version["status"]) == ("compatible_mapped", "approved")
    assert version["diff"]["nullability_changed"] == ["setpoint"]
    assert await cloud_rows(pool, first.lineage_id) == [(1, "b", 2.0)]
