"""``edgesync admin …`` on a fresh database, and the API served by ``Server``."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from edgesync.server import Server, ServerSettings

EDGESYNC = shutil.which("edgesync", path=str(Path(sys.executable).parent)) or "edgesync"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EDGESYNC, *args], capture_output=True, text=True, timeout=120,
                          check=False)


def run_json(*args: str) -> Any:
    out = run(*args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("command", [["admin"], ["admin", "bootstrap"], ["admin", "token"],
                                     ["admin", "token", "create"], ["events", "watch"]])
def test_help(command: list[str]) -> None:
    out = run(*command, "--help")
    assert out.returncode == 0 and "usage: edgesync" in out.stdout


async def test_bootstrap_token_create_and_revoke(database_url: str, unique: str,
                                                 client: httpx.AsyncClient) -> None:
    db = ("--database-url", database_url)
    boot = run(*("admin", "bootstrap", "--org", f"acme-{unique}", "--project",
                 f"plant-{unique}", "--topic-slug", f"plant-{unique}"), *db)
    assert boot.returncode == 0, boot.stderr
    assert "shown only once" in boot.stderr
    doc = json.loads(boot.stdout)
    assert doc["token"].startswith("esk_")
    base = f"/core/api/v1/projects/{doc['project_id']}"
    admin = {"Authorization": f"Bearer {doc['token']}", "ORG-ID": doc["org_id"]}
    r = await client.get(base + "/edge/lineages", headers=admin)
    assert r.status_code == 200, r.text

    ci = run_json("admin", "token", "create", "--org", f"acme-{unique}", "--principal", "ci",
                  "--kind", "service_account", "--project", f"plant-{unique}", *db)
    reader = {"Authorization": f"Bearer {ci['token']}", "ORG-ID": doc["org_id"]}
    assert (await client.get(base + "/devices", headers=reader)).status_code == 200
    r = await client.post(base + "/devices", json={"name": "gw"},
                          headers={**reader, "Idempotency-Key": str(uuid.uuid4())})
    assert r.status_code == 403

    assert run_json("admin", "token", "revoke", ci["token_id"], *db)["revoked"] is True
    assert (await client.get(base + "/devices", headers=reader)).status_code == 401

    missing = run("admin", "token", "create", "--org", f"acme-{unique}", "--principal", "x",
                  "--project", "no-such-project", *db)
    assert missing.returncode == 2 and "no-such-project" in missing.stderr


@pytest.mark.e2e
async def test_serve_runs_the_api_and_stops_with_a_stream_open(
        tmp_path: Path, database_url: str, mqtt_url: str, unique: str, tenant) -> None:
    settings = ServerSettings(database_url=database_url, mqtt_url=mqtt_url,
                              data_dir=tmp_path, client_id=f"api-{unique}", api_port=0)
    async with asyncio.timeout(120):  # hang guard, not a timing assertion
        async with Server(settings) as server, asyncio.TaskGroup() as tg, httpx.AsyncClient(
                base_url=server.api.url if server.api else "", timeout=60) as client:
            worker = tg.create_task(server.run(), name="test.worker")
            assert server.api is not None and server.api.port != 0
            r = await client.get("/openapi.json")
            assert r.status_code == 200 and r.json()["info"]["title"] == "edgesync API"
            r = await client.get(f"/core/api/v1/projects/{uuid.uuid4()}/edge/lineages")
            assert r.status_code == 401
            async with client.stream("GET", tenant.url("/events/stream"),
                                     headers=tenant.reader()) as stream:
                assert stream.status_code == 200
                await anext(stream.aiter_bytes())  # the stream is open
                worker.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await worker


async def test_reviews_reject_on_the_database_labels_the_staged_rows(
        database_url: str, tenant, stage, pool) -> None:
    """The database-direct reject is the API's: the review rejected and, in the same
    transaction, its staged batches labelled ``schema_rejected`` (staging's step)."""
    s = await stage(tenant)
    out = run_json("reviews", "reject", str(s.review_id), "--reason", "not this one",
                   "--actor", "ops", "--database-url", database_url)
    assert (out["id"], out["status"]) == (str(s.review_id), "rejected")
    reasons = await pool.fetch(
        "SELECT staging_reason FROM edge_staged_rows WHERE lineage_id = $1", s.lineage_id)
    assert [r["staging_reason"] for r in reasons] == ["schema_rejected"]
    again = run("reviews", "reject", str(s.review_id), "--database-url", database_url)
    assert again.returncode != 0 and "rejected" in again.stderr
