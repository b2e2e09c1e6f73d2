"""Schema review routes: list/detail/claim/approve/reject, action_version conflicts."""

from __future__ import annotations

import uuid

import asyncpg
import httpx


def idem() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


async def test_list_and_detail(client: httpx.AsyncClient, tenant, stage) -> None:
    s = await stage(tenant)
    r = await client.get(tenant.url("/edge/schema-reviews"), headers=tenant.reader(),
                         params={"status": "queued"})
    assert r.status_code == 200, r.text
    assert [x["id"] for x in r.json()["data"]] == [str(s.review_id)]
    assert r.json()["meta"]["total"] == 1
    r = await client.get(tenant.url("/edge/schema-reviews"), headers=tenant.reader(),
                         params={"lineage_id": str(uuid.uuid4())})
    assert r.json()["data"] == []
    r = await client.get(tenant.url(f"/edge/schema-reviews/{s.review_id}"),
                         headers=tenant.reader())
    review = r.json()["data"]
    assert (review["status"], review["action_version"], review["classification"]) == (
        "queued", 1, "ambiguous")
    assert [c["name"] for c in review["schema_columns"]["columns"]] == ["id", "mode",
                                                                        "setpoint"]
    r = await client.get(tenant.url(f"/edge/schema-reviews/{uuid.uuid4()}"),
                         headers=tenant.reader())
    assert r.status_code == 404 and r.json()["error"]["code"] == "REVIEW_NOT_FOUND"


async def test_status_open_lists_what_waits_for_an_operator(client: httpx.AsyncClient,
                                                             tenant, stage) -> None:
    """``status=open``: queued and in review, the console's and the TUI's default."""
    queued, claimed, approved = [await stage(tenant, name=f"gw-{n}") for n in range(3)]
    for s in (claimed, approved):
        r = await client.post(tenant.url(f"/edge/schema-reviews/{s.review_id}/claim"),
                              headers=tenant.headers(**idem()), json={"action_version": 1})
        assert r.status_code == 200, r.text
    r = await client.post(tenant.url(f"/edge/schema-reviews/{approved.review_id}/approve"),
                          headers=tenant.headers(**idem()), json={"action_version": 2})
    assert r.status_code == 200, r.text
    r = await client.get(tenant.url("/edge/schema-reviews"), headers=tenant.reader(),
                         params={"status": "open"})
    assert r.status_code == 200, r.text
    assert sorted((x["id"], x["status"]) for x in r.json()["data"]) == sorted(
        [(str(queued.review_id), "queued"), (str(claimed.review_id), "in_review")])
    r = await client.get(tenant.url("/edge/schema-reviews"), headers=tenant.reader(),
                         params={"status": "opened"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "status"


async def test_claim_then_approve_with_column_actions(client: httpx.AsyncClient, tenant,
                                                      stage, pool: asyncpg.Pool) -> None:
    s = await stage(tenant)
    url = tenant.url(f"/edge/schema-reviews/{s.review_id}")
    r = await client.post(url + "/claim", headers=tenant.headers(**idem()),
                          json={"action_version": 1})
    assert r.status_code == 200, r.text
    claimed = r.json()["data"]
    assert (claimed["status"], claimed["action_version"], claimed["claimed_by"]) == (
        "in_review", 2, "admin")

    stale = await client.post(url + "/approve", headers=tenant.headers(**idem()),
                              json={"action_version": 1})
    assert stale.status_code == 409
    assert stale.json()["error"]["code"] == "ACTION_VERSION_CONFLICT"

    bad = await client.post(url + "/approve", headers=tenant.headers(**idem()),
                            json={"action_version": 2, "column_actions": [
                                {"source_column_name": "id", "action": "mirror"}]})
    assert bad.status_code == 422
    # The error names the first refusal as before, and carries all of them (as the preview).
    assert bad.json()["error"] == {"code": "INVALID_REQUEST",
                                   "message": "no action for column(s) 'mode', 'setpoint'",
                                   "field": "column_actions",
                                   "refusals": [
        {"source_column_name": c, "code": "missing_action", "field": "column_actions",
         "detail": f"no action for column {c!r}",
         "fix": "give it an action (mirror, map, ignore…)"} for c in ("mode", "setpoint")]}

    r = await client.post(url + "/approve", headers=tenant.headers(**idem()), json={
        "action_version": 2, "column_actions": [
            {"source_column_name": "id", "action": "mirror"},
            {"source_column_name": "mode", "action": "mirror", "mirror_column_name": "hvac"},
            {"source_column_name": "setpoint", "action": "ignore"}]})
    assert r.status_code == 200, r.text
    approved = r.json()["data"]
    assert (approved["status"], approved["decided_by"]) == ("approved", "admin")
    table = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                s.lineage_id)
    cols = {r["attname"] for r in await pool.fetch(
        "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(quote_ident($1)) "
        "AND attnum > 0", table)}
    assert {"id", "hvac"} <= cols and "setpoint" not in cols

    again = await client.post(url + "/claim", headers=tenant.headers(**idem()),
                              json={"action_version": 3})
    assert again.status_code == 409 and again.json()["error"]["code"] == "CONFLICT"


async def test_reject_keeps_lineage_paused(client: httpx.AsyncClient, tenant, stage,
                                           pool: asyncpg.Pool) -> None:
    s = await stage(tenant)
    r = await client.post(tenant.url(f"/edge/schema-reviews/{s.review_id}/reject"),
                          headers=tenant.headers(**idem()),
                          json={"action_version": 1, "reason": "unexpected table"})
    assert r.status_code == 200, r.text
    assert (r.json()["data"]["status"], r.json()["data"]["decision_reason"]) == (
        "rejected", "unexpected table")
    status = await pool.fetchval("SELECT status FROM edge_table_lineages WHERE id = $1",
                                 s.lineage_id)
    assert status == "paused"


async def test_bodies_are_validated(client: httpx.AsyncClient, tenant, stage) -> None:
    s = await stage(tenant)
    url = tenant.url(f"/edge/schema-reviews/{s.review_id}")
    for body, field in (({}, "action_version"), ({"action_version": "1"}, "action_version"),
                        ({"action_version": 1, "extra": 1}, "extra"),
                        ({"action_version": 1, "column_actions": [{"action": "copy"}]},
                         "column_actions.0.source_column_name")):
        r = await client.post(url + "/approve", headers=tenant.headers(**idem()), json=body)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["error"]["code"] == "VALIDATION_FAILED"
        assert r.json()["error"]["field"] == field
    r = await client.post(url + "/claim", headers=tenant.headers(
        **idem(), **{"Content-Type": "application/json"}), content=b"{not json")
    assert r.status_code == 400 and r.json()["error"]["code"] == "MALFORMED_JSON"


async def test_approve_can_make_the_table_cloud_authoritative(client: httpx.AsyncClient,
                                                              tenant, stage) -> None:
    s = await stage(tenant)
    url = tenant.url(f"/edge/schema-reviews/{s.review_id}")
    await client.post(url + "/claim", headers=tenant.headers(**idem()),
                      json={"action_version": 1})
    r = await client.post(url + "/approve", headers=tenant.headers(**idem()),
                          json={"action_version": 2, "sync_authority": "cloud_authoritative"})
    assert r.status_code == 200, r.text
    lineage = (await client.get(tenant.url(f"/edge/lineages/{s.lineage_id}"),
                                headers=tenant.reader())).json()["data"]
    assert lineage["sync_authority"] == "cloud_authoritative"


async def test_preview_of_an_approval_changes_nothing(client: httpx.AsyncClient, tenant,
                                                      stage, pool: asyncpg.Pool) -> None:
    s = await stage(tenant)
    url = tenant.url(f"/edge/schema-reviews/{s.review_id}/preview")
    # read access is enough, and no Idempotency-Key: nothing is stored
    r = await client.post(url, headers=tenant.reader(), json={"column_actions": [
        {"source_column_name": "id", "action": "mirror"},
        {"source_column_name": "mode", "action": "mirror", "mirror_column_name": "hvac",
         "target_type": "jsonb"},
        {"source_column_name": "setpoint", "action": "defer"}]})
    assert r.status_code == 200, r.text
    p = r.json()["data"]
    assert p["pipeline"] == "rows" and p["target_table"].startswith("edge_state_")
    assert p["target_table"].endswith("_device_state")
    assert [(c["source_column_name"], c["target_column_name"], c["pg_type"], c["primary_key"])
            for c in p["columns"]] == [("id", "id", "bigint", True),
                                       ("mode", "hvac", "jsonb", False)]
    assert (p["ignored"], p["deferred"], p["data_points"]) == ([], ["setpoint"], [])

    r = await client.post(url, headers=tenant.reader(), json={})  # mirror every column
    assert [c["target_column_name"] for c in r.json()["data"]["columns"]] == [
        "id", "mode", "setpoint"]

    r = await client.post(url, headers=tenant.reader(), json={"column_actions": [
        {"source_column_name": "id", "action": "mirror"},
        {"source_column_name": "mode", "action": "mirror", "mirror_column_name": "id"},
        {"source_column_name": "setpoint", "action": "ignore"}]})
    # What the approval would refuse is a 200 listing the refusals, column by column.
    assert r.status_code == 200, r.text
    assert [(x["source_column_name"], x["code"], x["field"])
            for x in r.json()["data"]["refusals"]] == [
        ("mode", "name_taken", "column_actions[1].mirror_column_name")]
    r = await client.post(url, headers=tenant.reader(), json={"column_actions": [
        {"source_column_name": "id", "action": "mirror"}]})
    assert [(x["source_column_name"], x["code"]) for x in r.json()["data"]["refusals"]] == [
        ("mode", "missing_action"), ("setpoint", "missing_action")]
    r = await client.post(url, headers=tenant.reader(), json={})
    assert r.json()["data"]["refusals"] == []

    review = (await client.get(tenant.url(f"/edge/schema-reviews/{s.review_id}"),
                               headers=tenant.reader())).json()["data"]
    assert (review["status"], review["action_version"]) == ("queued", 1)
    assert await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                               s.lineage_id) is None
    r = await client.post(tenant.url(f"/edge/schema-reviews/{uuid.uuid4()}/preview"),
                          headers=tenant.reader(), json={})
    assert r.status_code == 404 and r.json()["error"]["code"] == "REVIEW_NOT_FOUND"


async def test_search_covers_every_page(client: httpx.AsyncClient, tenant, stage) -> None:
    """``q=``: a case-insensitive substring of device name, table, classification or who
    claimed/decided, counted over every page (the console's ``/``)."""
    await stage(tenant, "gw-east", "device_state")
    await stage(tenant, "gw-west", "alarms")

    async def tables(**params: object) -> tuple[list[str], int]:
        r = await client.get(tenant.url("/edge/schema-reviews"), headers=tenant.headers(),
                             params=params)
        assert r.status_code == 200, r.text
        return [x["source_table"] for x in r.json()["data"]], r.json()["meta"]["total"]

    assert await tables(q="WEST") == (["alarms"], 1)
    assert await tables(q="gw-", page=2, limit=1) == (["alarms"], 2)
    assert await tables(q="ambiguous") == (["device_state", "alarms"], 2)
    assert await tables(q="nothing like it") == ([], 0)
    for bad in ("x" * 201, "gw\x00"):  # too long; a NUL PostgreSQL cannot hold
        r = await client.get(tenant.url("/edge/schema-reviews"), headers=tenant.headers(),
                             params={"q": bad})
        assert r.status_code == 422 and r.json()["error"]["field"] == "q", r.text
