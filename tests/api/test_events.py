"""The governance event stream (SSE) served by uvicorn, and ``edgesync events watch``."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from edgesync.api import ApiServer, bind_socket, create_app
from edgesync.governance import emit

EDGESYNC = shutil.which("edgesync", path=str(Path(sys.executable).parent)) or "edgesync"


@pytest.fixture
async def api_url(pool: asyncpg.Pool) -> AsyncIterator[str]:
    server = ApiServer(create_app(pool), bind_socket("127.0.0.1", 0))
    task = asyncio.create_task(server.run(), name="test.api")
    try:
        yield server.url
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def emit_event(pool: asyncpg.Pool, project_id: uuid.UUID, kind: str) -> int:
    async with pool.acquire() as conn, conn.transaction():
        await emit(conn, project_id, kind, None, {"kind": kind})
        return int(await conn.fetchval("SELECT max(id) FROM edge_events WHERE project_id = $1",
                                       project_id))


async def read_events(stream: httpx.Response | AsyncIterator[str], count: int
                      ) -> list[dict[str, Any]]:
    """The next ``count`` events of an open stream (id/event/data fields)."""
    lines = stream.aiter_lines() if isinstance(stream, httpx.Response) else stream
    events: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    async with asyncio.timeout(60):  # a hang guard, not a timing assertion
        async for line in lines:
            if line == "":
                if "data" in current:
                    events.append(current)
                    if len(events) == count:
                        return events
                current = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                current[name] = value.removeprefix(" ")
    raise AssertionError(f"stream ended after {events}")


async def test_stream_delivers_live_events_of_its_project_only(
        api_url: str, pool: asyncpg.Pool, tenant, other_tenant) -> None:
    async with httpx.AsyncClient(base_url=api_url, timeout=60) as client, client.stream(
            "GET", tenant.url("/events/stream"), headers=tenant.reader()) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        await emit_event(pool, other_tenant.project_id, "test.other.v1")
        first = await emit_event(pool, tenant.project_id, "test.first.v1")
        second = await emit_event(pool, tenant.project_id, "test.second.v1")
        events = await read_events(r, 2)
    assert [(int(e["id"]), e["event"]) for e in events] == [(first, "test.first.v1"),
                                                           (second, "test.second.v1")]
    doc = json.loads(events[0]["data"])
    assert doc["project_id"] == str(tenant.project_id) and doc["body"] == {
        "kind": "test.first.v1"}


async def test_stream_resumes_after_last_event_id(api_url: str, pool: asyncpg.Pool,
                                                  tenant) -> None:
    ids = [await emit_event(pool, tenant.project_id, f"test.n{i}.v1") for i in range(3)]
    async with httpx.AsyncClient(base_url=api_url, timeout=60) as client:
        async with client.stream("GET", tenant.url("/events/stream"),
                                 headers=tenant.reader(**{"Last-Event-ID": str(ids[0])})) as r:
            events = await read_events(r, 2)
        assert [int(e["id"]) for e in events] == ids[1:]
        async with client.stream("GET", tenant.url("/events/stream"),
                                 params={"after": 0}, headers=tenant.reader()) as r:
            events = await read_events(r, 3)
        assert [int(e["id"]) for e in events] == ids


async def test_events_watch_prints_json_lines(api_url: str, pool: asyncpg.Pool,
                                              tenant) -> None:
    await emit_event(pool, tenant.project_id, "integration.edge_schema_review.queued.v1")
    await emit_event(pool, tenant.project_id, "integration.edge_schema_review.approved.v1")
    proc = await asyncio.create_subprocess_exec(
        EDGESYNC, "events", "watch", "--project", str(tenant.project_id), "--api-url", api_url,
        "--org-id", str(tenant.org_id), "--after", "0", "--max-events", "2",
        env={**os.environ, "EDGESYNC_TOKEN": tenant.reader_token},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    async with asyncio.timeout(120):  # hang guard
        out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    lines = [json.loads(line) for line in out.decode().splitlines()]
    assert [x["type"] for x in lines] == ["integration.edge_schema_review.queued.v1",
                                          "integration.edge_schema_review.approved.v1"]


async def test_events_watch_reports_http_errors(api_url: str, tenant) -> None:
    proc = await asyncio.create_subprocess_exec(
        EDGESYNC, "events", "watch", "--project", str(uuid.uuid4()), "--api-url", api_url,
        "--org-id", str(tenant.org_id), "--token", tenant.reader_token,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    async with asyncio.timeout(120):  # hang guard
        _, err = await proc.communicate()
    assert proc.returncode == 2
    assert "HTTP 404" in err.decode() and "PROJECT_NOT_FOUND" in err.decode()


async def test_an_event_committed_out_of_id_order_is_still_delivered(
        api_url: str, pool: asyncpg.Pool, tenant) -> None:
    async with httpx.AsyncClient(base_url=api_url, timeout=60) as client, client.stream(
            "GET", tenant.url("/events/stream"), headers=tenant.reader()) as r:
        lines = r.aiter_lines()
        slow = await pool.acquire()
        try:
            tx = slow.transaction()
            await tx.start()
            await emit(slow, tenant.project_id, "test.slow.v1", None, {})  # lower id, open
            fast = await emit_event(pool, tenant.project_id, "test.fast.v1")
            (first,) = await read_events(lines, 1)
            assert (int(first["id"]), first["event"]) == (fast, "test.fast.v1")
            await tx.commit()
        finally:
            await pool.release(slow)
        (late,) = await read_events(lines, 1)
    assert late["event"] == "test.slow.v1" and int(late["id"]) < fast
