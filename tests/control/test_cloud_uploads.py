"""Presigned uploads end to end in-process: url_request → url_grant control → HTTP PUT →
finalize → the object's rows go through governance (staged, approved, replayed)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
import pytest
import zstandard
from fastapi import FastAPI
from kits.review_helpers import approve

from edgesync import fleet
from edgesync.api.routes.uploads import upload_router
from edgesync.control import ObjectStore
from edgesync.ingest import IngestPipeline, OutcomeStatus, Replayer
from edgesync.ingest._objects import ObjectIngester
from edgesync.materialize import quote_ident

BASE = "http://edgesync.test"


def snapshot(factory: Any, rows: int) -> bytes:
    header = {"format_version": 1, "capture_strategy": "sqlite_row_batch_v1",
              "source_table": factory.table, "journal_epoch": factory.epoch,
              "schema_hash": factory.schema_hash, "schema_columns": factory.schema_columns}
    lines = [orjson.dumps(header)]
    for i in range(1, rows + 1):
        lines.append(orjson.dumps({"commit_seq": i, "op": "insert", "pk": {"id": i},
                                   "row": {"id": i, "mode": f"m{i % 7}", "setpoint": i / 4}}))
    return zstandard.ZstdCompressor().compress(b"\n".join(lines) + b"\n")


@pytest.fixture
def store(tmp_path: Path) -> ObjectStore:
    return ObjectStore(tmp_path / "objects")


async def grant(pool: Any, pipe: IngestPipeline, scope: fleet.DeviceScope) -> dict[str, Any]:
    req = {"format_version": 1, "request_kind": "url_request", "source_table": "device_state"}
    out = await pipe.handle(f"{scope.root_topic}/sync/ingest/request", orjson.dumps(req))
    assert out.status is OutcomeStatus.MATERIALIZED
    body = await pool.fetchval(
        "SELECT body FROM edge_pending_controls WHERE device_id = $1 AND "
        "control_kind = 'url_grant' ORDER BY created_at DESC LIMIT 1", scope.device_id)
    assert body["batch_id"] == out.detail and body["segment_kind"] == "bootstrap_snapshot"
    return dict(body)


async def put(app: FastAPI, url: str, data: bytes) -> httpx.Response:
    parts = urlsplit(url)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as c:
        return await c.put(f"{parts.path}?{parts.query}", content=data)


@pytest.mark.slow
async def test_snapshot_of_200k_rows_uploads_and_materializes(pool, batches, unique, store):
    async with pool.acquire() as conn:
        scope = await fleet.add_device(conn, project=f"up-{unique}", name=f"gw-{unique}",
                                       topic_slug=f"up-{unique}")
        # The snapshot is larger than the default staged-backlog cap (100k rows).
        await conn.execute("UPDATE edge_projects SET policy = $2 WHERE id = $1",
                           scope.project_id, {"max_pending_rows_per_lineage": 1_000_000})
    pipe = IngestPipeline(pool)
    pipe.upload_base_url = BASE
    app = FastAPI()
    app.include_router(upload_router(lambda: pool, store))
    g = await grant(pool, pipe, scope)
    f = batches()
    resp = await put(app, g["presigned_url"], snapshot(f, 200_000))
    assert resp.status_code == 200, resp.text
    assert (await put(app, g["presigned_url"], b"again")).status_code == 409

    fin = {"format_version": 1, "request_kind": "finalize", "source_table": "device_state",
           "batch_id": g["batch_id"], "segment_kind": "bootstrap_snapshot"}
    out = await pipe.handle(f"{scope.root_topic}/sync/ingest/request", orjson.dumps(fin))
    assert out.code == "upload_finalized"
    ingester = ObjectIngester(pool, pipe, store)
    obj = store.path(uuid.UUID(g["batch_id"]))
    kept = obj.read_bytes()
    assert await ingester.ingest_next()
    upload = await pool.fetchrow("SELECT status, rows_ingested, last_error FROM edge_uploads "
                                 "WHERE id = $1", uuid.UUID(g["batch_id"]))
    assert tuple(upload) == ("ingested", 200_000, None)
    assert not obj.exists()  # ingested objects are removed
    lineage = await pool.fetchrow("SELECT * FROM edge_table_lineages WHERE device_id = $1",
                                  scope.device_id)
    assert lineage["staged_rows"] == 200_000 and lineage["pause_reason"] == "schema_review"

    # A crash after the chunks committed, before the status and the removal: the object is
    # ingested again, its chunks are duplicates, nothing doubles.
    obj.write_bytes(kept)
    await pool.execute("UPDATE edge_uploads SET status = 'uploaded' WHERE id = $1",
                       uuid.UUID(g["batch_id"]))
    assert await ingester.ingest_next()
    assert await pool.fetchval("SELECT staged_rows FROM edge_table_lineages WHERE id = $1",
                               lineage["id"]) == 200_000

    await approve(pool, lineage["id"])
    await Replayer(pool).drain_pending()
    table = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                lineage["id"])
    count, total = await pool.fetchrow(
        f"SELECT count(*), sum(id) FROM {quote_ident(table)} WHERE NOT _edge_deleted")
    assert (count, total) == (200_000, 200_000 * 200_001 // 2)


async def test_forged_expired_and_early_finalize_are_refused(pool, batches, unique, store):
    async with pool.acquire() as conn:
        scope = await fleet.add_device(conn, project=f"uf-{unique}", name=f"gw-{unique}",
                                       topic_slug=f"uf-{unique}")
    pipe = IngestPipeline(pool)
    pipe.upload_base_url = BASE
    app = FastAPI()
    app.include_router(upload_router(lambda: pool, store))
    g = await grant(pool, pipe, scope)
    forged = g["presigned_url"].replace("signature=", "signature=0")
    assert (await put(app, forged, b"x")).status_code == 404
    url = urlsplit(g["presigned_url"])
    expired = g["presigned_url"].replace(
        next(q for q in url.query.split("&") if q.startswith("expires=")), "expires=1000")
    assert (await put(app, expired, b"x")).status_code == 404  # signature covers expiry
    fin = {"format_version": 1, "request_kind": "finalize", "source_table": "device_state",
           "batch_id": g["batch_id"], "segment_kind": "bootstrap_snapshot"}
    early = await pipe.handle(f"{scope.root_topic}/sync/ingest/request", orjson.dumps(fin))
    assert (early.status, early.code) == (OutcomeStatus.REJECTED, "upload_incomplete")
    other = await pipe.handle(f"{scope.root_topic}/sync/ingest/request",
                              orjson.dumps({**fin, "batch_id": str(uuid.uuid4())}))
    assert other.code == "unknown_upload"
    small = ObjectStore(store.root, max_bytes=10)
    app2 = FastAPI()
    app2.include_router(upload_router(lambda: pool, small))
    assert (await put(app2, g["presigned_url"], b"0123456789ABC")).status_code == 413


async def test_a_spilled_row_larger_than_a_batch_materializes(pool, batches, unique, store):
    async with pool.acquire() as conn:
        scope = await fleet.add_device(conn, project=f"us-{unique}", name=f"gw-{unique}",
                                       topic_slug=f"us-{unique}")
    pipe = IngestPipeline(pool)
    pipe.upload_base_url = BASE
    app = FastAPI()
    app.include_router(upload_router(lambda: pool, store))
    f = batches()
    # An ordinary batch first (opens the review), then approve, then the spill.
    first = await pipe.handle(f"{scope.root_topic}/sync/rows/batch", f.payload(
        f.rows(("insert", {"id": 1, "mode": "small", "setpoint": 1.0}))))
    await approve(pool, first.lineage_id)
    await Replayer(pool).drain_pending()
    req = {"format_version": 1, "request_kind": "url_request", "source_table": "device_state",
           "segment_kind": "payload_spill"}
    out = await pipe.handle(f"{scope.root_topic}/sync/ingest/request", orjson.dumps(req))
    body = await pool.fetchval("SELECT body FROM edge_pending_controls WHERE device_id = $1 "
                               "AND control_kind = 'url_grant'", scope.device_id)
    assert body["batch_id"] == out.detail
    huge = "x" * (700 * 1024)
    header = {"format_version": 1, "capture_strategy": "sqlite_row_batch_v1",
              "source_table": f.table, "journal_epoch": f.epoch, "schema_hash": f.schema_hash}
    line = {"commit_seq": 2, "op": "insert", "pk": {"id": 2},
            "row": {"id": 2, "mode": huge, "setpoint": None}}
    obj = zstandard.ZstdCompressor().compress(orjson.dumps(header) + b"\n" + orjson.dumps(line))
    assert (await put(app, body["presigned_url"], obj)).status_code == 200
    fin = {"format_version": 1, "request_kind": "finalize", "source_table": "device_state",
           "batch_id": body["batch_id"], "segment_kind": "payload_spill"}
    await pipe.handle(f"{scope.root_topic}/sync/ingest/request", orjson.dumps(fin))
    assert await ObjectIngester(pool, pipe, store).ingest_next()
    status = await pool.fetchrow("SELECT status, last_error FROM edge_uploads WHERE id = $1",
                                 uuid.UUID(body["batch_id"]))
    assert tuple(status) == ("ingested", None)
    table = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                first.lineage_id)
    assert await pool.fetchval(f"SELECT length(mode) FROM {quote_ident(table)} WHERE id = 2") \
        == len(huge)
