"""Device data points over the API: create/list/detail, values after a mapped approval
(registry and device reviews), and the checks on both."""

from __future__ import annotations

import uuid

import asyncpg
import httpx

from edgesync.ingest import Replayer


def idem() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


async def test_create_list_detail(client: httpx.AsyncClient, tenant) -> None:
    url = tenant.url("/edge/data-points")
    r = await client.post(url, headers=tenant.headers(**idem()),
                          json={"name": "temp", "value_type": "real", "unit": "degC"})
    assert r.status_code == 201, r.text
    dp = r.json()["data"]
    assert (dp["name"], dp["value_type"], dp["unit"], dp["project_id"]) == (
        "temp", "real", "degC", str(tenant.project_id))
    await client.post(url, headers=tenant.headers(**idem()),
                      json={"name": "mode", "value_type": "text"})
    r = await client.post(url, headers=tenant.headers(**idem()),
                          json={"name": "temp", "value_type": "integer"})
    assert (r.status_code, r.json()["error"]["code"], r.json()["error"]["field"]) == (
        409, "DATA_POINT_NAME_ALREADY_IN_USE", "name")
    r = await client.post(url, headers=tenant.headers(**idem()),
                          json={"name": "x", "value_type": "float"})
    assert (r.status_code, r.json()["error"]["field"]) == (422, "value_type")
    r = await client.post(url, headers=tenant.reader(**idem()),
                          json={"name": "y", "value_type": "real"})
    assert (r.status_code, r.json()["error"]["code"]) == (403, "PERMISSION_DENIED")

    page = (await client.get(url, headers=tenant.reader(), params={"limit": 1})).json()
    assert [d["name"] for d in page["data"]] == ["mode"] and page["meta"]["total"] == 2
    r = await client.get(tenant.url(f"/edge/data-points/{dp['id']}"), headers=tenant.reader())
    assert r.json()["data"] == dp
    r = await client.get(tenant.url(f"/edge/data-points/{uuid.uuid4()}"),
                         headers=tenant.reader())
    assert (r.status_code, r.json()["error"]["code"]) == (404, "DATA_POINT_NOT_FOUND")


async def test_values_after_a_mapped_registry_approval(client: httpx.AsyncClient, tenant,
                                                       stage_registry,
                                                       pool: asyncpg.Pool) -> None:
    r = await client.post(tenant.url("/edge/data-points"), headers=tenant.headers(**idem()),
                          json={"name": "setpoint", "value_type": "real"})
    dp = r.json()["data"]["id"]
    rid, (a, b) = await stage_registry(tenant, "gw-a", "gw-b")
    url = tenant.url(f"/edge/registry-reviews/{rid}")
    await client.post(url + "/claim", headers=tenant.headers(**idem()),
                      json={"action_version": 1})
    r = await client.post(url + "/approve", headers=tenant.headers(**idem()), json={
        "action_version": 2, "column_actions": [
            {"source_column_name": "id", "action": "mirror"},
            {"source_column_name": "mode", "action": "mirror"},
            {"source_column_name": "setpoint", "action": "map",
             "device_data_point_id": dp}]})
    assert r.status_code == 200, r.text
    (mapped,) = [x for x in r.json()["data"]["column_actions"] if x["action"] == "map"]
    assert mapped["device_data_point_id"] == dp
    assert await Replayer(pool).drain_pending(project_id=tenant.project_id) == 4

    values = tenant.url(f"/edge/data-points/{dp}/values")
    page = (await client.get(values, headers=tenant.reader())).json()
    assert page["meta"]["total"] == 4
    assert sorted((v["device_id"], v["value"]) for v in page["data"]
                  if v["value"] is not None) == sorted(
        [(str(a.device.device_id), 20.5), (str(b.device.device_id), 20.5)])
    one = (await client.get(values, headers=tenant.reader(),
                            params={"device_id": str(b.device.device_id)})).json()
    assert {v["device_id"] for v in one["data"]} == {str(b.device.device_id)}
    assert one["meta"]["total"] == 2
    second = (await client.get(values, headers=tenant.reader(),
                               params={"limit": 3, "page": 2})).json()
    assert len(second["data"]) == 1 and second["meta"] == {"page": 2, "limit": 3, "total": 4}
    assert second["data"][0] == page["data"][3]
    later = (await client.get(values, headers=tenant.reader(),
                              params={"from": "2999-01-01T00:00:00"})).json()
    assert (later["data"], later["meta"]["total"]) == ([], 0)
    r = await client.get(values, headers=tenant.reader(),
                         params={"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"})
    assert (r.status_code, r.json()["error"]["field"]) == (422, "to")
    r = await client.get(values, headers=tenant.reader(), params={"limit": 5000, "page": 3})
    assert (r.status_code, r.json()["error"]["field"]) == (422, "page")


async def test_auto_create_and_map_on_a_device_review(client: httpx.AsyncClient, tenant,
                                                      stage) -> None:
    s = await stage(tenant)
    url = tenant.url(f"/edge/schema-reviews/{s.review_id}")
    body = {"action_version": 2, "column_actions": [
        {"source_column_name": "id", "action": "mirror"},
        {"source_column_name": "mode", "action": "mirror"},
        {"source_column_name": "setpoint", "action": "auto_create_and_map",
         "data_point_name": "gw_setpoint"}]}
    await client.post(url + "/claim", headers=tenant.headers(**idem()),
                      json={"action_version": 1})
    r = await client.post(url + "/approve", headers=tenant.headers(**idem()), json=body)
    assert (r.status_code, r.json()["error"]["field"]) == (
        422, "column_actions[2].action")  # the policy does not allow it yet
    await client.patch(tenant.url("/edge/policy"), headers=tenant.headers(**idem()),
                       json={"allow_auto_create_device_data_points": True})
    r = await client.post(url + "/approve", headers=tenant.headers(**idem()), json=body)
    assert r.status_code == 200, r.text
    (dp,) = (await client.get(tenant.url("/edge/data-points"),
                              headers=tenant.reader())).json()["data"]
    assert (dp["name"], dp["value_type"]) == ("gw_setpoint", "real")
