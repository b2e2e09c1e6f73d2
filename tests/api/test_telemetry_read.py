"""``GET …/edge/lineages/{id}/telemetry``: time range, device, columns, limit."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import httpx
from kits.telemetry_payloads import T0, Telemetry, rfc3339

from edgesync import fleet
from edgesync.ingest import IngestPipeline, Replayer


def idem() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


async def telemetry_device(pool: asyncpg.Pool, tenant, name: str
                           ) -> tuple[fleet.DeviceScope, Telemetry]:
    async with pool.acquire() as conn:
        device = await fleet.add_device(conn, project=tenant.project_name, name=name,
                                        topic_slug=tenant.slug)
    return device, Telemetry()


async def send(pool: asyncpg.Pool, device: fleet.DeviceScope, payload: bytes) -> Any:
    return await IngestPipeline(pool).handle(f"{device.root_topic}/sync/telemetry/batch",
                                             payload)


async def approve_via_api(client: httpx.AsyncClient, tenant, lineage_id: uuid.UUID) -> None:
    r = await client.get(tenant.url("/edge/schema-reviews"), headers=tenant.headers(),
                         params={"lineage_id": str(lineage_id), "status": "queued"})
    (review,) = r.json()["data"]
    url = tenant.url(f"/edge/schema-reviews/{review['id']}")
    r = await client.post(url + "/claim", headers=tenant.headers(**idem()),
                          json={"action_version": review["action_version"]})
    assert r.status_code == 200, r.text
    r = await client.post(url + "/approve", headers=tenant.headers(**idem()),
                          json={"action_version": r.json()["data"]["action_version"]})
    assert r.status_code == 200, r.text


async def test_read_telemetry_by_time_range_columns_and_device(
        client: httpx.AsyncClient, tenant, pool: asyncpg.Pool) -> None:
    gw1, s1 = await telemetry_device(pool, tenant, "ts-1")
    first = await send(pool, gw1, s1.samples((T0, 1.0), (T0 + timedelta(minutes=1), 2.0)))
    lineage_id = first.lineage_id
    url = tenant.url(f"/edge/lineages/{lineage_id}/telemetry")
    before = await client.get(url, headers=tenant.reader())
    assert (before.status_code, before.json()["error"]["code"]) == (
        404, "TELEMETRY_NOT_PROVISIONED")

    await approve_via_api(client, tenant, lineage_id)
    await Replayer(pool).drain_pending()
    await send(pool, gw1, s1.samples(*[(T0 + timedelta(minutes=m), float(m))
                                       for m in range(2, 10)]))
    # A second device of the project shares the edge_ts_* table.
    gw2, s2 = await telemetry_device(pool, tenant, "ts-2")
    other = await send(pool, gw2, s2.samples((T0, 99.0), sensor="s2"))
    await approve_via_api(client, tenant, other.lineage_id)
    await Replayer(pool).drain_pending()

    r = await client.get(url, headers=tenant.reader())
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["meta"]["total"] == 10
    assert [x["value_c"] for x in doc["data"]] == [1.0, 2.0, *map(float, range(2, 10))]
    assert {x["device_id"] for x in doc["data"]} == {str(gw1.device_id)}
    assert set(doc["data"][0]) == {"device_id", "event_ts", "row_id", "ts", "value_c",
                                   "sensor"}

    r = await client.get(url, headers=tenant.reader(), params={
        "from": rfc3339(T0 + timedelta(minutes=3)), "to": rfc3339(T0 + timedelta(minutes=7)),
        "columns": "value_c", "limit": 3})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["meta"] == {"page": 1, "limit": 3, "total": 4}
    assert [x["value_c"] for x in doc["data"]] == [3.0, 4.0, 5.0]
    assert set(doc["data"][0]) == {"device_id", "event_ts", "row_id", "value_c"}
    assert datetime.fromisoformat(doc["data"][0]["event_ts"]) == T0 + timedelta(minutes=3)

    r = await client.get(url, headers=tenant.reader(),
                         params={"device_id": str(gw2.device_id)})
    assert [x["value_c"] for x in r.json()["data"]] == [99.0]

    for params, field in (({"columns": "value_c,nope"}, "columns"),
                          ({"columns": "device_id"}, "columns"),
                          ({"device_id": str(uuid.uuid4())}, "device_id"),
                          ({"from": rfc3339(T0), "to": rfc3339(T0)}, "to")):
        r = await client.get(url, headers=tenant.reader(), params=params)
        assert r.status_code == 422, (params, r.text)
        assert (r.json()["error"]["code"], r.json()["error"]["field"]) == (
            "INVALID_REQUEST", field)


async def test_state_lineages_have_no_telemetry(client: httpx.AsyncClient, tenant,
                                                stage) -> None:
    s = await stage(tenant)
    r = await client.get(tenant.url(f"/edge/lineages/{s.lineage_id}/telemetry"),
                         headers=tenant.reader())
    assert (r.status_code, r.json()["error"]["code"]) == (404, "TELEMETRY_NOT_PROVISIONED")


async def test_mirror_rows_of_a_telemetry_lineage_points_to_telemetry(
        client: httpx.AsyncClient, tenant, pool: asyncpg.Pool) -> None:
    """Approved or not, a telemetry lineage has no state table: the answer says where its
    rows are, not "approve its schema review first"."""
    gw, s = await telemetry_device(pool, tenant, "ts-mirror")
    lineage_id = (await send(pool, gw, s.samples((T0, 1.0)))).lineage_id
    message = (f"lineage {lineage_id} is a telemetry lineage: it has no state table; read its "
               "rows with GET …/lineages/{id}/telemetry (edgesync lineages telemetry ID)")
    for approved in (False, True):
        if approved:
            await approve_via_api(client, tenant, lineage_id)
        r = await client.get(tenant.url(f"/edge/lineages/{lineage_id}/mirror-rows"),
                             headers=tenant.reader())
        error = r.json()["error"]
        assert (r.status_code, error["code"], error["message"]) == (
            404, "MIRROR_NOT_PROVISIONED", message)
