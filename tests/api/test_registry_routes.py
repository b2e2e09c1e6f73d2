"""Registry coalescing over the API: registry entries and reviews (list, detail, claim,
approve, reject, abandon), coalesced mirrors, and the fleet-scoped routes."""

from __future__ import annotations

import uuid

import asyncpg
import httpx

from edgesync.ingest import Replayer


def idem() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


async def test_registry_review_claim_approve_and_mirror(client: httpx.AsyncClient, tenant,
                                                       stage_registry,
                                                       pool: asyncpg.Pool) -> None:
    rid, (a, b) = await stage_registry(tenant, "gw-a", "gw-b")
    r = await client.get(tenant.url("/edge/registry-reviews"), headers=tenant.reader(),
                         params={"status": "queued"})
    assert r.status_code == 200, r.text
    (listed,) = r.json()["data"]
    assert (listed["id"], listed["scope"], listed["source_table"], listed["action_version"],
            listed["registry_status"]) == (str(rid), "project", "device_state", 1, "pending")
    assert r.json()["meta"] == {"page": 1, "limit": 50, "total": 1}
    # No device reviews in coalesced mode.
    r = await client.get(tenant.url("/edge/schema-reviews"), headers=tenant.reader())
    assert r.json()["data"] == []

    detail = (await client.get(tenant.url(f"/edge/registry-reviews/{rid}"),
                               headers=tenant.reader())).json()["data"]
    assert [c["name"] for c in detail["schema_columns"]["columns"]] == ["id", "mode",
                                                                        "setpoint"]
    assert {d["device_id"] for d in detail["devices"]} == {str(a.device.device_id),
                                                           str(b.device.device_id)}
    (entry,) = (await client.get(tenant.url("/edge/registry"),
                                 headers=tenant.reader())).json()["data"]
    assert (entry["id"], entry["status"], entry["device_count"], entry["target_table"]) == (
        detail["registry_id"], "pending", 2, None)

    url = tenant.url(f"/edge/registry-reviews/{rid}")
    r = await client.post(url + "/approve", headers=tenant.headers(**idem()),
                          json={"action_version": 1, "column_actions": [
                              {"source_column_name": "id", "action": "defer"}]})
    assert r.status_code == 422, r.text  # refused: nothing changed, still queued at 1
    assert [(x["source_column_name"], x["code"]) for x in r.json()["error"]["refusals"]] == [
        ("id", "defer_not_allowed"), ("mode", "missing_action"), ("setpoint", "missing_action")]
    r = await client.post(url + "/claim", headers=tenant.headers(**idem()),
                          json={"action_version": 7})
    assert r.status_code == 409, r.text
    assert r.json()["error"] == {"code": "ACTION_VERSION_CONFLICT", "field": "action_version",
                                 "message": r.json()["error"]["message"]}
    r = await client.post(url + "/claim", headers=tenant.headers(**idem()),
                          json={"action_version": 1})
    assert r.status_code == 200, r.text
    claimed = r.json()["data"]
    assert (claimed["status"], claimed["action_version"], claimed["claimed_by"]) == (
        "in_review", 2, "admin")

    r = await client.post(url + "/approve", headers=tenant.headers(**idem()), json={
        "action_version": 2, "column_actions": [
            {"source_column_name": "id", "action": "mirror"},
            {"source_column_name": "mode", "action": "mirror", "mirror_column_name": "hvac"},
            {"source_column_name": "setpoint", "action": "ignore"}]})
    assert r.status_code == 200, r.text
    approved = r.json()["data"]
    table = f"edge_state_p{tenant.project_id.hex[:8]}_device_state"
    assert (approved["status"], approved["target_table"], approved["decided_by"],
            approved["action_version"]) == ("approved", table, "admin", 3)
    r = await client.post(url + "/reject", headers=tenant.headers(**idem()),
                          json={"action_version": 3})
    assert (r.status_code, r.json()["error"]["code"]) == (409, "CONFLICT")

    assert await Replayer(pool).drain_pending(project_id=tenant.project_id) == 4
    for s in (a, b):
        lineage = (await client.get(tenant.url(f"/edge/lineages/{s.lineage_id}"),
                                    headers=tenant.reader())).json()["data"]
        assert (lineage["status"], lineage["target_table"]) == ("active", table)
        rows = (await client.get(tenant.url(f"/edge/lineages/{s.lineage_id}/mirror-rows"),
                                 headers=tenant.reader())).json()["data"]
        assert sorted((x["id"], x["hvac"]) for x in rows) == [(1, "heat"), (2, "cool")]

    (mirror,) = (await client.get(tenant.url("/edge/coalesced-mirrors"),
                                  headers=tenant.reader())).json()["data"]
    assert (mirror["id"], mirror["scope"], mirror["device_count"], mirror["fleet_id"]) == (
        table, "project", 2, None)
    r = await client.get(tenant.url(f"/edge/coalesced-mirrors/{table}"),
                         headers=tenant.reader())
    assert r.json()["data"] == mirror
    r = await client.get(tenant.url("/edge/coalesced-mirrors/edge_state_nope"),
                         headers=tenant.reader())
    assert (r.status_code, r.json()["error"]["code"]) == (404, "COALESCED_MIRROR_NOT_FOUND")
    entry = (await client.get(tenant.url(f"/edge/registry/{entry['id']}"),
                              headers=tenant.reader())).json()["data"]
    assert (entry["status"], entry["target_table"], entry["device_count"]) == (
        "approved", table, 2)
    assert {d["status"] for d in entry["devices"]} == {"approved"}
    r = await client.get(tenant.url(f"/edge/registry/{uuid.uuid4()}"), headers=tenant.reader())
    assert (r.status_code, r.json()["error"]["code"]) == (404, "REGISTRY_ENTRY_NOT_FOUND")
    r = await client.get(tenant.url(f"/edge/registry-reviews/{uuid.uuid4()}"),
                         headers=tenant.reader())
    assert (r.status_code, r.json()["error"]["code"]) == (404, "REGISTRY_REVIEW_NOT_FOUND")


async def test_reject_then_abandon(client: httpx.AsyncClient, tenant, stage_registry,
                                   pool: asyncpg.Pool) -> None:
    rid, staged = await stage_registry(tenant, "gw-a", "gw-b")
    r = await client.post(tenant.url(f"/edge/registry-reviews/{rid}/reject"),
                          headers=tenant.headers(**idem()),
                          json={"action_version": 1, "reason": "not this layout"})
    assert r.status_code == 200, r.text
    assert (r.json()["data"]["status"], r.json()["data"]["decision_reason"],
            r.json()["data"]["registry_status"]) == ("rejected", "not this layout", "rejected")
    for s in staged:
        lineage = (await client.get(tenant.url(f"/edge/lineages/{s.lineage_id}"),
                                    headers=tenant.reader())).json()["data"]
        assert (lineage["status"], lineage["staged_rows"]) == ("paused", 2)

    rid2, staged2 = await stage_registry(tenant, "gw-c", "gw-d", table="valves")
    r = await client.get(tenant.url("/edge/registry"), headers=tenant.reader(),
                         params={"status": "rejected"})
    assert [e["source_table"] for e in r.json()["data"]] == ["device_state"]
    r = await client.post(tenant.url(f"/edge/registry-reviews/{rid2}/abandon"),
                          headers=tenant.headers(**idem()), json={"action_version": 1})
    assert r.status_code == 200, r.text
    assert r.json()["data"]["status"] == "abandoned"
    # Each waiting device got its own device review.
    for s in staged2:
        r = await client.get(tenant.url("/edge/schema-reviews"), headers=tenant.reader(),
                             params={"lineage_id": str(s.lineage_id)})
        assert [x["status"] for x in r.json()["data"]] == ["queued"]


async def test_registry_approve_is_validated(client: httpx.AsyncClient, tenant,
                                             stage_registry) -> None:
    rid, _ = await stage_registry(tenant, "gw-a")
    url = tenant.url(f"/edge/registry-reviews/{rid}")
    await client.post(url + "/claim", headers=tenant.headers(**idem()),
                      json={"action_version": 1})
    r = await client.post(url + "/approve", headers=tenant.headers(**idem()), json={
        "action_version": 2, "column_actions": [
            {"source_column_name": "id", "action": "mirror"},
            {"source_column_name": "mode", "action": "defer"},
            {"source_column_name": "setpoint", "action": "mirror"}]})
    assert r.status_code == 422, r.text
    assert r.json()["error"] | {"message": "", "refusals": []} == {
        "code": "INVALID_REQUEST", "field": "column_actions[1].action", "message": "",
        "refusals": []}
    assert [x["code"] for x in r.json()["error"]["refusals"]] == ["defer_not_allowed"]
    r = await client.post(url + "/approve", headers=tenant.headers(**idem()),
                          json={"action_version": 2, "sync_authority": "cloud_authoritative"})
    assert (r.status_code, r.json()["error"]["code"]) == (422, "VALIDATION_FAILED")
    r = await client.get(url, headers=tenant.reader())
    assert (r.json()["data"]["status"], r.json()["data"]["action_version"]) == ("in_review", 2)


async def test_fleet_scoped_routes(client: httpx.AsyncClient, tenant, stage_registry,
                                   pool: asyncpg.Pool) -> None:
    rid, (n1, _) = await stage_registry(tenant, "gw-n1", "gw-n2", mode="fleet", fleet="north")
    north = n1.device.fleet_id
    r = await client.post(tenant.url("/devices"), headers=tenant.headers(**idem()),
                          json={"name": "gw-s1", "fleet": "south"})
    south = r.json()["data"]["fleet_id"]
    n, s = f"/fleets/{north}/edge", f"/fleets/{south}/edge"

    r = await client.get(tenant.url(f"{n}/registry-reviews"), headers=tenant.reader())
    assert [(x["id"], x["scope"], x["fleet_id"]) for x in r.json()["data"]] == [
        (str(rid), "fleet", str(north))]
    r = await client.get(tenant.url(f"{s}/registry-reviews"), headers=tenant.reader())
    assert r.json()["data"] == []
    r = await client.get(tenant.url("/edge/registry-reviews"), headers=tenant.reader(),
                         params={"fleet_id": south})
    assert r.json()["data"] == []
    r = await client.get(tenant.url(f"{s}/registry-reviews/{rid}"), headers=tenant.reader())
    assert (r.status_code, r.json()["error"]["code"]) == (404, "REGISTRY_REVIEW_NOT_FOUND")
    r = await client.post(tenant.url(f"{s}/registry-reviews/{rid}/claim"),
                          headers=tenant.headers(**idem()), json={"action_version": 1})
    assert (r.status_code, r.json()["error"]["code"]) == (404, "REGISTRY_REVIEW_NOT_FOUND")
    r = await client.get(tenant.url(f"/fleets/{uuid.uuid4()}/edge/registry"),
                         headers=tenant.reader())
    assert (r.status_code, r.json()["error"]["code"]) == (404, "FLEET_NOT_FOUND")

    (entry,) = (await client.get(tenant.url(f"{n}/registry"),
                                 headers=tenant.reader())).json()["data"]
    r = await client.get(tenant.url(f"{s}/registry/{entry['id']}"), headers=tenant.reader())
    assert (r.status_code, r.json()["error"]["code"]) == (404, "REGISTRY_ENTRY_NOT_FOUND")
    r = await client.get(tenant.url(f"{n}/registry/{entry['id']}"), headers=tenant.reader())
    assert r.json()["data"]["fleet_id"] == str(north)

    r = await client.post(tenant.url(f"{n}/registry-reviews/{rid}/claim"),
                          headers=tenant.headers(**idem()), json={"action_version": 1})
    assert r.status_code == 200, r.text
    r = await client.post(tenant.url(f"{n}/registry-reviews/{rid}/approve"),
                          headers=tenant.headers(**idem()), json={"action_version": 2})
    assert r.status_code == 200, r.text
    table = f"edge_state_f{north.hex[:8]}_device_state"
    assert r.json()["data"]["target_table"] == table
    assert await Replayer(pool).drain_pending(project_id=tenant.project_id) == 4

    (mirror,) = (await client.get(tenant.url(f"{n}/coalesced-mirrors"),
                                  headers=tenant.reader())).json()["data"]
    assert (mirror["id"], mirror["fleet_id"], mirror["device_count"]) == (table, str(north), 2)
    r = await client.get(tenant.url(f"{n}/coalesced-mirrors/{table}"), headers=tenant.reader())
    assert r.json()["data"] == mirror
    r = await client.get(tenant.url(f"{s}/coalesced-mirrors/{table}"), headers=tenant.reader())
    assert (r.status_code, r.json()["error"]["code"]) == (404, "COALESCED_MIRROR_NOT_FOUND")
    assert (await client.get(tenant.url(f"{s}/coalesced-mirrors"),
                             headers=tenant.reader())).json()["data"] == []


async def test_registry_preview_names_the_coalesced_target(client: httpx.AsyncClient, tenant,
                                                           stage_registry,
                                                           pool: asyncpg.Pool) -> None:
    rid, _ = await stage_registry(tenant, "gw-a", "gw-b")
    url = tenant.url(f"/edge/registry-reviews/{rid}/preview")
    r = await client.post(url, headers=tenant.reader(), json={"column_actions": [
        {"source_column_name": "id", "action": "mirror"},
        {"source_column_name": "mode", "action": "mirror", "mirror_column_name": "hvac"},
        {"source_column_name": "setpoint", "action": "ignore"}]})
    assert r.status_code == 200, r.text
    p = r.json()["data"]
    assert p["target_table"] == f"edge_state_p{tenant.project_id.hex[:8]}_device_state"
    assert [c["target_column_name"] for c in p["columns"]] == ["id", "hvac"]
    assert p["ignored"] == ["setpoint"]
    r = await client.post(url, headers=tenant.reader(), json={"column_actions": [
        {"source_column_name": "id", "action": "mirror"},
        {"source_column_name": "mode", "action": "defer"},
        {"source_column_name": "setpoint", "action": "ignore"}]})
    assert r.status_code == 200, r.text  # what the approval refuses, as a refusal
    assert [(x["source_column_name"], x["code"], x["field"])
            for x in r.json()["data"]["refusals"]] == [
        ("mode", "defer_not_allowed", "column_actions[1].action")]
    review = (await client.get(tenant.url(f"/edge/registry-reviews/{rid}"),
                               headers=tenant.reader())).json()["data"]
    assert (review["status"], review["action_version"], review["target_table"]) == (
        "queued", 1, None)
    assert await pool.fetchval("SELECT to_regclass($1) IS NULL", p["target_table"])


async def test_search_registry_reviews_and_mirrors_every_page(client: httpx.AsyncClient,
                                                              tenant, stage_registry,
                                                              pool: asyncpg.Pool) -> None:
    """``q`` filters registry reviews (tables, hash, classification, claimer, decider,
    reason, linked devices' names) and coalesced mirrors (tables, devices' names) on the
    server, any case, so a search reaches every page; ``%`` and ``_`` are themselves, not
    wildcards."""
    r1, _ = await stage_registry(tenant, "gw_north_1", table="valve_x")
    r2, _ = await stage_registry(tenant, "gw-north-2", table="valvesx")
    r3, _ = await stage_registry(tenant, "gw-south-1", table="pumps")
    r = await client.post(tenant.url(f"/edge/registry-reviews/{r3}/reject"),
                          headers=tenant.headers(**idem()),
                          json={"action_version": 1, "reason": "100% not ours"})
    assert r.status_code == 200, r.text

    async def found(path: str, **params: str | int) -> tuple[list[str], int]:
        r = await client.get(tenant.url(path), headers=tenant.reader(), params=params)
        assert r.status_code == 200, r.text
        return [x["source_table"] for x in r.json()["data"]], r.json()["meta"]["total"]

    async def reviews(**params: str | int) -> tuple[list[str], int]:
        return await found("/edge/registry-reviews", **params)

    assert await reviews(q="VALVE") == (["valve_x", "valvesx"], 2)
    assert await reviews(q="valve", page=2, limit=1) == (["valvesx"], 2)
    assert await reviews(q="e_x") == (["valve_x"], 1)  # "_" is not any character
    assert await reviews(q="north_") == (["valve_x"], 1)  # a waiting device's name
    assert await reviews(q="NORTH-2") == (["valvesx"], 1)
    assert await reviews(q="%") == (["pumps"], 1)  # the reason; "%" is not "anything"
    assert await reviews(q="100% NOT") == (["pumps"], 1)
    assert await reviews(q="valve", status="rejected") == ([], 0)
    assert await reviews(q="nothing like it") == ([], 0)
    assert (await reviews(q=""))[1] == 3
    hash_ = await pool.fetchval("SELECT r.schema_hash FROM edge_registry_reviews rr JOIN "
                                "edge_schema_registry r ON r.id = rr.registry_id "
                                "WHERE rr.id = $1", r2)
    assert await reviews(q=hash_[:16].upper()) == (["valvesx"], 1)  # the table is hashed
    fleet = (await client.get(tenant.url("/edge/registry-reviews"), headers=tenant.reader(),
                              params={"q": "valve_x", "fleet_id": str(uuid.uuid4())})).json()
    assert fleet["data"] == []

    for rid in (r1, r2):
        url = tenant.url(f"/edge/registry-reviews/{rid}")
        r = await client.post(url + "/claim", headers=tenant.headers(**idem()),
                              json={"action_version": 1})
        assert r.status_code == 200, r.text
        r = await client.post(url + "/approve", headers=tenant.headers(**idem()),
                              json={"action_version": 2})
        assert r.status_code == 200, r.text
    assert await reviews(q="ADMIN", status="approved") == (["valve_x", "valvesx"], 2)
    assert (await reviews(q="admin"))[1] == 3  # who claimed or decided
    await Replayer(pool).drain_pending(project_id=tenant.project_id)

    async def mirrors(**params: str | int) -> tuple[list[str], int]:
        return await found("/edge/coalesced-mirrors", **params)

    assert sorted((await mirrors(q="VALVE"))[0]) == ["valve_x", "valvesx"]
    first, second = await mirrors(q="valve", limit=1), await mirrors(q="valve", page=2, limit=1)
    assert first[1] == second[1] == 2 and sorted(first[0] + second[0]) == ["valve_x", "valvesx"]
    assert await mirrors(q="e_x") == (["valve_x"], 1)
    assert await mirrors(q="gw_north") == (["valve_x"], 1)  # a device writing to it
    assert await mirrors(q="%") == ([], 0)
    assert await mirrors(q="pumps") == ([], 0)  # rejected: no mirror
    for path in ("/edge/coalesced-mirrors", "/edge/registry-reviews"):
        for bad in ("x" * 201, "valve\x00"):  # too long; a NUL PostgreSQL cannot hold
            r = await client.get(tenant.url(path), headers=tenant.reader(), params={"q": bad})
            assert r.status_code == 422 and r.json()["error"]["field"] == "q", r.text


async def test_next_registry_review_carries_the_last_decision(client: httpx.AsyncClient, tenant,
                                                              stage_registry, batches,
                                                              pool: asyncpg.Pool) -> None:
    """A new schema of a coalesced target is suggested the scope's last approved decision
    (a renamed mirror, an ignored column), a new column is mirrored; approving a queued
    registry review needs no claim first."""
    from edgesync.ingest import IngestPipeline

    rid, staged = await stage_registry(tenant, "gw-a")
    url = tenant.url(f"/edge/registry-reviews/{rid}")
    r = await client.post(url + "/approve", headers=tenant.headers(**idem()), json={
        "action_version": 1, "column_actions": [
            {"source_column_name": "id", "action": "mirror"},
            {"source_column_name": "mode", "action": "mirror", "mirror_column_name": "hvac"},
            {"source_column_name": "setpoint", "action": "ignore"}]})
    assert r.status_code == 200, r.text
    assert (r.json()["data"]["status"], r.json()["data"]["claimed_by"]) == ("approved", "admin")
    f = batches("device_state", columns=[("id", "INTEGER", 1, True), ("mode", "TEXT", 0, True),
                                         ("setpoint", "REAL", 0, False),
                                         ("unit", "TEXT", 0, False)])
    await IngestPipeline(pool).handle(f"{staged[0].device.root_topic}/sync/rows/batch",
                                      f.payload(f.rows(("insert", {"id": 3, "mode": "fan",
                                                                   "setpoint": 1.0,
                                                                   "unit": "C"}))))
    second = await pool.fetchval(
        "SELECT id FROM edge_registry_reviews WHERE project_id = $1 AND status = 'queued'",
        tenant.project_id)
    assert second is not None
    detail = (await client.get(tenant.url(f"/edge/registry-reviews/{second}"),
                               headers=tenant.reader())).json()["data"]
    assert {s["source_column_name"]: (s["action"], s["mirror_column_name"], s["suggestion"])
            for s in detail["suggested_column_actions"]} == {
        "id": ("mirror", None, "carried"), "mode": ("mirror", "hvac", "carried"),
        "setpoint": ("ignore", None, "carried"), "unit": ("mirror", None, "new")}
    actions = [{k: v for k, v in s.items() if k not in ("suggestion", "reason") and v is not None}
               for s in detail["suggested_column_actions"]]
    p = (await client.post(tenant.url(f"/edge/registry-reviews/{second}/preview"),
                           headers=tenant.reader(), json={"column_actions": actions})).json()
    assert (p["data"]["refusals"], p["data"]["retired_columns"]) == ([], [])
