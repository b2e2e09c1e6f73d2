"""``/healthz`` and ``/readyz`` of ``edgesync serve``: ready once the database, the
migrations, both broker sessions and every background loop are up; 503 naming what is
not (here: a broker nobody listens on) otherwise."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from kits.e2e_kit import cloud, eventually

from edgesync.api import create_app
from edgesync.server import Server, ServerSettings

LIMIT = 30  # hang guard, not a timing assertion


async def get(url: str) -> tuple[int, Any]:
    async with httpx.AsyncClient() as client:
        r = await client.get(url)
    return r.status_code, r.json()


async def test_a_running_server_is_healthy_and_ready(database_url: str, mqtt_url: str,
                                                     tmp_path: Path, unique: str) -> None:
    async with cloud(database_url, mqtt_url, tmp_path, unique) as server:
        assert server.api is not None
        assert await get(f"{server.api.url}/healthz") == (200, {"status": "ok"})

        async def ready() -> Any:
            status, body = await get(f"{server.api.url}/readyz")
            return body if status == 200 else None

        body = await eventually(ready, LIMIT, "/readyz answers 200")
        assert body["status"] == "ready" and body["not_ready"] == []
        for name in ("database", "migrations", "broker:ingest", "broker:control",
                     "loop:edgesync.ingest", "loop:edgesync.replay",
                     "loop:edgesync.control.outbox", "loop:edgesync.control.progress",
                     "loop:edgesync.control.publisher"):
            assert body["checks"][name]["ok"], name
        assert "loop:edgesync.api" not in body["checks"]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_server_without_its_broker_is_not_ready_and_says_why(
        database_url: str, tmp_path: Path, unique: str) -> None:
    settings = ServerSettings(database_url=database_url,
                              mqtt_url=f"mqtt://127.0.0.1:{closed_port()}", data_dir=tmp_path,
                              client_id=f"worker-{unique}", api_port=0)
    async with Server(settings) as server:
        task = asyncio.create_task(server.run())
        try:
            assert server.api is not None
            url = f"{server.api.url}/readyz"

            async def failing() -> Any:
                with contextlib.suppress(httpx.HTTPError):
                    status, body = await get(url)
                    names = {c["check"] for c in body["not_ready"]}
                    replay_up = body["checks"]["loop:edgesync.replay"]["ok"]
                    if status == 503 and "loop:edgesync.ingest" in names and replay_up:
                        return body
                return None

            # (the replayer, on the database only, is up meanwhile)
            body = await eventually(failing, LIMIT, "/readyz names the failing ingest loop")
            assert body["status"] == "not_ready"
            not_ready = {c["check"]: c["detail"] for c in body["not_ready"]}
            assert not_ready["broker:ingest"].startswith("ingest not subscribed on")
            assert not_ready["broker:control"].startswith("control publisher not connected")
            assert "ingest from" in not_ready["loop:edgesync.ingest"]
            # What does work is reported as such.
            assert body["checks"]["database"]["ok"] and body["checks"]["migrations"]["ok"]
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_an_api_alone_checks_its_database(pool: asyncpg.Pool) -> None:
    app = create_app(pool)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://api") as client:
        r = await client.get("/readyz")
        assert r.status_code == 200
        assert set(r.json()["checks"]) == {"database", "migrations"}
        # Kept out of the OpenAPI document (no token, not part of the operator API).
        paths = (await client.get("/openapi.json")).json()["paths"]
        assert not {"/healthz", "/readyz", "/metrics"} & set(paths)
