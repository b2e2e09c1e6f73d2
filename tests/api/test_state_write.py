"""``POST …/devices/{d}/edge/state-tables/{lineage}/rows``: cloud write-back."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import httpx


def idem() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


async def approve(client: httpx.AsyncClient, tenant, review_id: uuid.UUID,
                  **extra: Any) -> None:
    url = tenant.url(f"/edge/schema-reviews/{review_id}")
    r = await client.post(url + "/claim", headers=tenant.headers(**idem()),
                          json={"action_version": 1})
    assert r.status_code == 200, r.text
    r = await client.post(url + "/approve", headers=tenant.headers(**idem()),
                          json={"action_version": 2, **extra})
    assert r.status_code == 200, r.text


def rows_url(tenant, s) -> str:
    return tenant.url(f"/devices/{s.device.device_id}/edge/state-tables/{s.lineage_id}/rows")


async def test_write_back_to_a_cloud_authoritative_table(client: httpx.AsyncClient, tenant,
                                                         stage, pool: asyncpg.Pool) -> None:
    s = await stage(tenant)
    await approve(client, tenant, s.review_id, sync_authority="cloud_authoritative")
    body = {"rows": [{"pk": {"id": 7}, "values": {"mode": "eco", "setpoint": 18.0}}]}
    headers = tenant.headers(**idem())
    r = await client.post(rows_url(tenant, s), headers=headers, json=body)
    assert r.status_code == 200, r.text
    out = r.json()["data"]
    assert (out["rows_written"], out["source_table"], out["cloud_version"]) == (
        1, "device_state", 1)
    control = await pool.fetchrow("SELECT control_kind AS kind, device_id "
                                  "FROM edge_pending_controls WHERE id = $1",
                                  uuid.UUID(out["control_id"]))
    assert control is not None and control["kind"] == "state_write"
    assert control["device_id"] == s.device.device_id
    table = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                s.lineage_id)
    row = await pool.fetchrow(f'SELECT mode, _edge_cloud_version FROM "{table}" WHERE id = 7')
    assert tuple(row) == ("eco", 1)

    again = await client.post(rows_url(tenant, s), headers=headers, json=body)
    assert again.json() == r.json() and again.headers["Idempotent-Replayed"] == "true"
    assert await pool.fetchval("SELECT cloud_version FROM edge_table_lineages WHERE id = $1",
                               s.lineage_id) == 1

    bad = await client.post(rows_url(tenant, s), headers=tenant.headers(**idem()),
                            json={"rows": [{"pk": {"mode": "x"}, "values": {"mode": "y"}}]})
    assert bad.status_code == 422
    assert (bad.json()["error"]["code"], bad.json()["error"]["field"]) == (
        "INVALID_REQUEST", "rows[0].pk")
    empty = await client.post(rows_url(tenant, s), headers=tenant.headers(**idem()),
                              json={"rows": []})
    assert empty.status_code == 422 and empty.json()["error"]["field"] == "rows"


async def test_device_authoritative_table_refuses_write_back(client: httpx.AsyncClient,
                                                             tenant, stage,
                                                             pool: asyncpg.Pool) -> None:
    s = await stage(tenant)
    body = {"rows": [{"pk": {"id": 1}, "values": {"mode": "off"}}]}
    # Before approval there is no mirror to write to (whatever the authority will be).
    r = await client.post(rows_url(tenant, s), headers=tenant.headers(**idem()), json=body)
    assert r.status_code == 404, r.text
    assert r.json()["error"]["code"] == "edge_state_mirror_not_provisioned"
    await approve(client, tenant, s.review_id)
    r = await client.post(rows_url(tenant, s), headers=tenant.headers(**idem()), json=body)
    assert r.status_code == 403
    assert r.json()["error"]["code"] == "edge_state_not_cloud_authoritative"
    assert await pool.fetchval("SELECT count(*) FROM edge_pending_controls WHERE lineage_id"
                               " = $1 AND control_kind = 'state_write'", s.lineage_id) == 0


async def test_write_back_needs_the_lineage_of_that_device(client: httpx.AsyncClient, tenant,
                                                           stage) -> None:
    s = await stage(tenant)
    other = await stage(tenant, name="gw-2")
    body = {"rows": [{"pk": {"id": 1}, "values": {"mode": "off"}}]}
    wrong_device = tenant.url(f"/devices/{other.device.device_id}/edge/state-tables/"
                              f"{s.lineage_id}/rows")
    r = await client.post(wrong_device, headers=tenant.headers(**idem()), json=body)
    assert (r.status_code, r.json()["error"]["code"]) == (404, "LINEAGE_NOT_FOUND")
    no_device = tenant.url(f"/devices/{uuid.uuid4()}/edge/state-tables/{s.lineage_id}/rows")
    r = await client.post(no_device, headers=tenant.headers(**idem()), json=body)
    assert (r.status_code, r.json()["error"]["code"]) == (404, "DEVICE_NOT_FOUND")
