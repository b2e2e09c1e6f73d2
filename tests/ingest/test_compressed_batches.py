"""Compressed batches (docs/protocol.md, "Compressed batches"): a row or telemetry batch
sent as one zstd frame of its JSON is taken exactly as the same batch sent plain — same
outcome, same ledger row, same staged bytes, same target rows — and a frame that is a
decompression bomb or corrupt ends as a rejection in the ledger."""

from __future__ import annotations

from datetime import timedelta

import asyncpg
import orjson
import pytest
from kits.review_helpers import approve
from kits.telemetry_payloads import T0, Telemetry

from edgesync import _core, fleet
from edgesync.ingest import IngestPipeline, OutcomeStatus, Replayer
from edgesync.materialize import quote_ident
from edgesync.protocol import TopicKind, topic_for


async def _device(pool: asyncpg.Pool, project: str, name: str) -> fleet.DeviceScope:
    async with pool.acquire() as conn:
        return await fleet.add_device(conn, project=project, name=name,
                                         topic_slug=f"z-{project}")


async def _staged_blobs(pool: asyncpg.Pool, device: fleet.DeviceScope) -> list[bytes]:
    rows = await pool.fetch("SELECT blob FROM edge_staged_rows WHERE device_id = $1 "
                            "ORDER BY id", device.device_id)
    return [_core.decompress_blob(r["blob"]) for r in rows]


async def _ledger(pool: asyncpg.Pool, device: fleet.DeviceScope) -> list[tuple[object, ...]]:
    rows = await pool.fetch(
        "SELECT batch_id, topic_kind, source_table, outcome, rejection_code, payload_bytes "
        "FROM edge_export_segments WHERE device_id = $1 ORDER BY batch_id", device.device_id)
    return [tuple(r) for r in rows]


async def test_a_compressed_row_batch_is_the_plain_batch(pool, unique, batches):
    plain_dev = await _device(pool, f"zp-{unique}", "plain")
    zipped_dev = await _device(pool, f"zz-{unique}", "zipped")
    pipe = IngestPipeline(pool)
    f = batches()
    first = f.payload(f.rows(("insert", {"id": 1, "mode": "heat", "setpoint": 20.5}),
                             ("insert", {"id": 2, "mode": "cool", "setpoint": None})))
    frame = _core.compress_blob(first, 3)
    assert frame.startswith(_core.ZSTD_MAGIC) and len(frame) < len(first)

    rows_topic = TopicKind.ROWS_BATCH
    plain = await pipe.handle(topic_for(plain_dev.root_topic, rows_topic), first)
    zipped = await pipe.handle(topic_for(zipped_dev.root_topic, rows_topic), frame)
    assert (zipped.status, zipped.code) == (plain.status, plain.code) == (
        OutcomeStatus.STAGED, "schema_review")
    # Staging keeps the batch's JSON, whichever way it came.
    assert await _staged_blobs(pool, zipped_dev) == await _staged_blobs(pool, plain_dev) == [
        first]
    assert await _ledger(pool, zipped_dev) == await _ledger(pool, plain_dev)

    # Approved and replayed, then live: the same target rows.
    later = f.payload(f.rows(("update", {"id": 2, "mode": "fan", "setpoint": 18.0})),
                      with_schema=False)
    for device, out, wire in ((plain_dev, plain, later),
                              (zipped_dev, zipped, _core.compress_blob(later, 3))):
        assert out.lineage_id is not None
        await approve(pool, out.lineage_id)
        await Replayer(pool).drain_pending(project_id=device.project_id)
        live = await pipe.handle(topic_for(device.root_topic, rows_topic), wire)
        assert live.status is OutcomeStatus.MATERIALIZED and live.rows == 1
        # A redelivered frame is a duplicate, as a redelivered plain batch is.
        again = await pipe.handle(topic_for(device.root_topic, rows_topic), wire)
        assert again.status is OutcomeStatus.DUPLICATE
    tables = [await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                  out.lineage_id) for out in (plain, zipped)]
    contents = [[tuple(r) for r in await pool.fetch(
        f"SELECT id, mode, setpoint FROM {quote_ident(t)} ORDER BY id")] for t in tables]
    assert contents[0] == contents[1] == [(1, "heat", 20.5), (2, "fan", 18.0)]
    assert await _ledger(pool, zipped_dev) == await _ledger(pool, plain_dev)


async def test_a_compressed_telemetry_batch_is_the_plain_batch(pool, unique):
    plain_dev = await _device(pool, f"tp-{unique}", "plain")
    zipped_dev = await _device(pool, f"tz-{unique}", "zipped")
    pipe = IngestPipeline(pool)
    t = Telemetry()
    payload = t.samples(*[(T0 + timedelta(seconds=i), 20.0 + i / 10) for i in range(50)])
    kind = TopicKind.TELEMETRY_BATCH
    plain = await pipe.handle(topic_for(plain_dev.root_topic, kind), payload)
    zipped = await pipe.handle(topic_for(zipped_dev.root_topic, kind),
                               _core.compress_blob(payload, 3))
    assert (zipped.status, zipped.code) == (plain.status, plain.code)
    assert await _staged_blobs(pool, zipped_dev) == await _staged_blobs(pool, plain_dev) == [
        payload]
    assert await _ledger(pool, zipped_dev) == await _ledger(pool, plain_dev)


@pytest.mark.parametrize(("name", "frame", "code"), [
    # 64 MiB of JSON whitespace in a few KiB: refused while inflating.
    ("bomb", _core.compress_blob(b" " * (64 << 20), 3), "payload_too_large"),
    # One byte past the limit once inflated.
    ("just over", _core.compress_blob(b" " * (_core.MAX_BATCH_BYTES + 1), 3),
     "payload_too_large"),
    ("truncated", _core.compress_blob(b'{"batch_id": 1}' * 100, 3)[:-3], "malformed_json"),
    ("not JSON inside", _core.compress_blob(b"\x00\x01binary", 3), "malformed_json"),
])
async def test_bad_frames_are_rejected_in_the_ledger(pool, unique, name, frame, code):
    device = await _device(pool, f"zb-{unique}", "gw")
    pipe = IngestPipeline(pool)
    out = await pipe.handle(topic_for(device.root_topic, TopicKind.ROWS_BATCH), frame)
    assert (out.status, out.code) == (OutcomeStatus.REJECTED, code), out.detail
    row = await pool.fetchrow("SELECT outcome, rejection_code, rejection_detail "
                              "FROM edge_export_segments WHERE device_id = $1",
                              device.device_id)
    assert (row["outcome"], row["rejection_code"]) == ("rejected", code)
    if code == "payload_too_large":
        assert "inflates past the 524288-byte limit" in row["rejection_detail"]


async def test_a_frame_of_a_valid_batch_with_a_bad_row_is_rejected_like_the_plain_one(
        pool, unique, batches):
    device = await _device(pool, f"zr-{unique}", "gw")
    pipe = IngestPipeline(pool)
    f = batches()
    doc = orjson.loads(f.payload(f.rows(("insert", {"id": 1, "mode": "a", "setpoint": 1.0}))))
    doc["batch_id"] = "not-a-uuid"
    bad = orjson.dumps(doc)
    plain = await pipe.handle(topic_for(device.root_topic, TopicKind.ROWS_BATCH), bad)
    zipped = await pipe.handle(topic_for(device.root_topic, TopicKind.ROWS_BATCH),
                               _core.compress_blob(bad, 3))
    assert (zipped.status, zipped.code, zipped.detail) == (
        plain.status, plain.code, plain.detail) == (
        OutcomeStatus.REJECTED, "invalid_batch_id", plain.detail)
