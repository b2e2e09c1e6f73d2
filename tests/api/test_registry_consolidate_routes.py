"""``POST /edge/coalesced-mirrors/{source_table}/consolidate``: device-scoped lineages moved
into the coalesced mirror, at project scope and for one fleet; 409s; idempotency."""

from __future__ import annotations

import uuid

import asyncpg
import httpx
from kits.api_cli import Cli

from edgesync import governance
from edgesync.ingest import Replayer


def idem() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


async def approve_device_review(pool: asyncpg.Pool, review_id: uuid.UUID) -> None:
    async with pool.acquire() as conn:
        claimed = await governance.claim_review(conn, review_id, actor="t", action_version=1)
        await governance.approve_review(conn, review_id, actor="t",
                                        action_version=claimed.action_version,
                                        column_actions=None)


async def test_consolidate_route(client: httpx.AsyncClient, tenant, stage, stage_registry,
                                 pool: asyncpg.Pool) -> None:
    a = await stage(tenant, name="gw-a")
    b = await stage(tenant, name="gw-b", fleet="north")
    for s in (a, b):
        await approve_device_review(pool, s.review_id)
    await Replayer(pool).drain_pending(project_id=tenant.project_id)
    url = tenant.url("/edge/coalesced-mirrors/device_state/consolidate")

    r = await client.post(url, headers=tenant.headers())
    assert (r.status_code, r.json()["error"]["code"]) == (400, "IDEMPOTENCY_KEY_REQUIRED")
    r = await client.post(url, headers=tenant.reader(**idem()))
    assert r.status_code == 403, r.text
    r = await client.post(url, headers=tenant.headers(**idem()))
    assert r.status_code == 409, r.text
    assert "schema_coalescing_mode" in r.json()["error"]["message"]

    rid, (c,) = await stage_registry(tenant, "gw-c")  # PATCH policy → project
    r = await client.post(url, headers=tenant.headers(**idem()))
    assert r.status_code == 409, r.text
    assert "no approved registry entry" in r.json()["error"]["message"]
    review = tenant.url(f"/edge/registry-reviews/{rid}")
    assert (await client.post(review + "/claim", headers=tenant.headers(**idem()),
                              json={"action_version": 1})).status_code == 200
    assert (await client.post(review + "/approve", headers=tenant.headers(**idem()),
                              json={"action_version": 2})).status_code == 200
    await Replayer(pool).drain_pending(project_id=tenant.project_id)
    table = f"edge_state_p{tenant.project_id.hex[:8]}_device_state"

    # The fleet route consolidates that fleet's devices only.
    fleet = tenant.url(f"/fleets/{b.device.fleet_id}/edge/coalesced-mirrors/device_state/"
                       "consolidate")
    r = await client.post(fleet, headers=tenant.headers(**idem()))
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert (data["mode"], data["fleet_id"], data["skipped"]) == (
        "project", str(b.device.fleet_id), [])
    (moved,) = data["consolidated"]
    assert (moved["lineage_id"], moved["to_table"], moved["rows_copied"],
            moved["tombstones_copied"], moved["old_table_kept"]) == (
        str(b.lineage_id), table, 2, 0, f"edge_state_{b.device.device_id.hex[:8]}_device_state")
    r = await client.post(tenant.url(f"/fleets/{uuid.uuid4()}/edge/coalesced-mirrors/"
                                     "device_state/consolidate"), headers=tenant.headers(**idem()))
    assert (r.status_code, r.json()["error"]["code"]) == (404, "FLEET_NOT_FOUND")

    key = idem()
    r = await client.post(url, headers=tenant.headers(**key))
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert ([m["lineage_id"] for m in data["consolidated"]], data["skipped"]) == (
        [str(a.lineage_id)], [])
    replayed = await client.post(url, headers=tenant.headers(**key))
    assert (replayed.headers.get("Idempotent-Replayed"), replayed.json()) == ("true", r.json())
    again = await client.post(url, headers=tenant.headers(**idem()))
    assert again.status_code == 200, again.text
    assert (again.json()["data"]["consolidated"], again.json()["data"]["skipped"]) == ([], [])

    rows = await pool.fetch(f'SELECT device_id, id FROM "{table}"')
    assert sorted((r["device_id"], r["id"]) for r in rows) == sorted(
        (s.device.device_id, i) for s in (a, b, c) for i in (1, 2))
    for s in (a, b):
        lineage = (await client.get(tenant.url(f"/edge/lineages/{s.lineage_id}"),
                                    headers=tenant.reader())).json()["data"]
        assert (lineage["status"], lineage["target_table"]) == ("active", table)
    (mirror,) = (await client.get(tenant.url("/edge/coalesced-mirrors"),
                                  headers=tenant.reader())).json()["data"]
    assert mirror["device_count"] == 3


async def test_consolidate_through_the_cli(run: Cli, tenant, stage, stage_registry,
                                           pool: asyncpg.Pool) -> None:
    a = await stage(tenant, name="gw-a")
    await approve_device_review(pool, a.review_id)
    await Replayer(pool).drain_pending(project_id=tenant.project_id)
    code, _, err = run("registry", "consolidate", "device_state", ok=False)
    assert code != 0 and "schema_coalescing_mode" in err
    rid, _ = await stage_registry(tenant, "gw-c")
    run("registry", "approve", str(rid))
    _, out, _ = run("registry", "consolidate", "device_state")
    assert out.startswith("consolidated (1)\n")
    assert str(a.lineage_id) in out and "skipped (0)\n(none)" in out
    data = run.json("registry", "consolidate", "device_state")["data"]
    assert (data["consolidated"], data["skipped"]) == ([], [])
