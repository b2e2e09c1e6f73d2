"""Uploads: url_request → url_grant → HTTP PUT (a tiny in-process server) → finalize,
for a re-seed after a capture gap and for a row too large for a batch."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest
from agent_helpers import make_config, next_message, observer, send_control

from edgesync import _core
from edgesync.agent import Agent


class UploadServer:
    def __init__(self) -> None:
        self.bodies: dict[str, bytes] = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.bodies[self.path.split("?")[0].rsplit("/", 1)[-1]] = body
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b'{"data": {}}')

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def lines(self, batch_id: str) -> list[dict[str, Any]]:
        raw = _core.decompress_blob(self.bodies[batch_id])  # every frame, one after another
        return [orjson.loads(line) for line in raw.splitlines() if line.strip()]


@pytest.fixture
def uploads() -> Iterator[UploadServer]:
    srv = UploadServer()
    yield srv
    srv.http.shutdown()
    srv.http.server_close()


def grant(srv: UploadServer, cid: str, batch_id: str, kind: str, expires: str
          ) -> dict[str, Any]:
    return {"control_id": cid, "control_kind": "url_grant", "source_table": "t",
            "batch_id": batch_id, "segment_kind": kind,
            "presigned_url": f"{srv.url}/core/api/v1/edge/uploads/{batch_id}?expires=1&"
                             "signature=x", "presigned_url_expires_at": expires}


B1 = "01960000-0000-7000-8000-000000000001"
B2 = "01960000-0000-7000-8000-000000000002"


async def test_gap_is_reseeded_by_a_bootstrap_upload(
        app: sqlite3.Connection, source_db: Path, tmp_path: Path, device_id: str,
        uploads: UploadServer) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    cfg = make_config(device_id, source_db, tmp_path, local_retention_bytes=4000)
    root = cfg.connection.root_topic
    req = f"{root}/sync/ingest/request"
    async with observer(device_id) as obs, Agent(cfg) as agent:
        await obs.subscribe(f"{root}/sync/#", qos=1)
        app.executemany("INSERT INTO t VALUES (?, 'x')", [(i,) for i in range(1, 201)])
        await agent.flush()
        assert (await next_message(obs, req))["request_kind"] == "gap_report"
        assert (await next_message(obs, req))["request_kind"] == "url_request"
        # an expired grant: the agent asks again
        await send_control(obs, root, grant(uploads, "g1", B1, "bootstrap_snapshot",
                                            "2020-01-01T00:00:00Z"))
        await next_message(obs, f"{root}/sync/ingest/ack")
        await agent.flush()
        assert (await next_message(obs, req)) == {
            "format_version": 1, "request_kind": "url_request", "source_table": "t",
            "segment_kind": "bootstrap_snapshot"}
        await send_control(obs, root, grant(uploads, "g2", B2, "bootstrap_snapshot",
                                            "2999-01-01T00:00:00Z"))
        await next_message(obs, f"{root}/sync/ingest/ack")
        await agent.flush()
        assert (await next_message(obs, req)) == {
            "format_version": 1, "request_kind": "finalize", "source_table": "t",
            "batch_id": B2, "segment_kind": "bootstrap_snapshot"}
    assert B1 not in uploads.bodies
    header, *rows = uploads.lines(B2)
    assert header["format_version"] == 1 and header["source_table"] == "t"
    assert header["capture_strategy"] == "sqlite_row_batch_v1"
    assert {"journal_epoch", "schema_hash", "schema_columns"} <= set(header)
    assert sorted(r["row"]["id"] for r in rows) == list(range(1, 201))
    seqs = [r["commit_seq"] for r in rows]
    assert seqs == sorted(set(seqs)) and seqs[0] > 200
    assert {r["op"] for r in rows} == {"insert"}


async def test_a_row_too_large_for_a_batch_is_spilled(
        app: sqlite3.Connection, source_db: Path, tmp_path: Path, device_id: str,
        uploads: UploadServer) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)")
    cfg = make_config(device_id, source_db, tmp_path)
    root = cfg.connection.root_topic
    req = f"{root}/sync/ingest/request"
    async with observer(device_id) as obs, Agent(cfg) as agent:
        await obs.subscribe(f"{root}/sync/#", qos=1)
        app.execute("INSERT INTO t VALUES (1, zeroblob(400000))")  # 800,000 hex digits
        app.execute("INSERT INTO t VALUES (2, x'01')")
        assert await agent.flush() == 1  # the small row goes on by MQTT
        batch = await next_message(obs, f"{root}/sync/rows/batch")
        assert [r["pk"]["id"] for r in batch["rows"]] == [2]
        assert (await next_message(obs, req))["segment_kind"] == "payload_spill"
        await send_control(obs, root, grant(uploads, "g", B1, "payload_spill",
                                            "2999-01-01T00:00:00Z"))
        await next_message(obs, f"{root}/sync/ingest/ack")
        await agent.flush()
        assert (await next_message(obs, req))["request_kind"] == "finalize"
    _, row = uploads.lines(B1)
    assert row["commit_seq"] == 1 and len(row["row"]["v"]["$blob"]) == 800_000
