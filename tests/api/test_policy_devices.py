"""Project policy (GET/PATCH) and devices (list/create)."""

from __future__ import annotations

import uuid

import httpx


def idem() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


async def test_policy_defaults_patch_and_reset(client: httpx.AsyncClient, tenant) -> None:
    r = await client.get(tenant.url("/edge/policy"), headers=tenant.reader())
    assert r.status_code == 200, r.text
    assert r.json()["data"]["max_pending_rows_per_lineage"] == 100_000
    assert r.json()["data"]["schema_coalescing_mode"] == "none"

    r = await client.patch(tenant.url("/edge/policy"), headers=tenant.headers(**idem()), json={
        "schema_coalescing_mode": "fleet", "max_pending_rows_per_lineage": 5000,
        "resume_threshold_percent": 70, "allow_additive_continue": True})
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert (data["schema_coalescing_mode"], data["max_pending_rows_per_lineage"],
            data["resume_threshold_percent"], data["allow_additive_continue"]) == (
        "fleet", 5000, 70, True)
    assert data["max_pending_bytes_per_lineage"] == 1 << 30

    r = await client.patch(tenant.url("/edge/policy"), headers=tenant.headers(**idem()),
                           json={"max_pending_rows_per_lineage": None})
    assert r.json()["data"]["max_pending_rows_per_lineage"] == 100_000
    assert r.json()["data"]["schema_coalescing_mode"] == "fleet"


async def test_policy_values_are_validated(client: httpx.AsyncClient, tenant) -> None:
    for body, field in (({"schema_coalescing_mode": "galaxy"}, "schema_coalescing_mode"),
                        ({"resume_threshold_percent": 100}, "resume_threshold_percent"),
                        ({"max_pending_rows_per_lineage": 0}, "max_pending_rows_per_lineage"),
                        ({"allow_additive_continue": "yes"}, "allow_additive_continue"),
                        ({"surprise": 1}, "surprise")):
        r = await client.patch(tenant.url("/edge/policy"), headers=tenant.headers(**idem()),
                               json=body)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["error"]["field"] == field
    # An unknown field is told which fields there are (pydantic's own words were
    # "Extra inputs are not permitted", issue 27).
    assert r.json()["error"]["message"] == (
        "no field 'surprise' here; the fields are: allow_additive_continue, "
        "allow_auto_create_device_data_points, materialization_breaker_threshold, "
        "max_pending_bytes_per_lineage, max_pending_rows_per_lineage, "
        "resume_threshold_percent, schema_coalescing_mode, verify_interval_seconds")


async def test_create_and_list_devices(client: httpx.AsyncClient, tenant) -> None:
    r = await client.post(tenant.url("/devices"), headers=tenant.headers(**idem()),
                          json={"name": "gw-7", "fleet": "north"})
    assert r.status_code == 201, r.text
    dev = r.json()["data"]
    assert (dev["name"], dev["fleet"], dev["root_topic"]) == ("gw-7", "north",
                                                              f"{tenant.slug}/gw-7")
    dup = await client.post(tenant.url("/devices"), headers=tenant.headers(**idem()),
                            json={"name": "gw-7"})
    assert dup.status_code == 409
    assert dup.json()["error"]["code"] == "DEVICE_NAME_ALREADY_IN_USE"
    bad = await client.post(tenant.url("/devices"), headers=tenant.headers(**idem()),
                            json={"name": "has/slash"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "name"

    r = await client.get(tenant.url("/devices"), headers=tenant.reader())
    assert [d["name"] for d in r.json()["data"]] == ["gw-7"]
    r = await client.get(tenant.url("/devices"), headers=tenant.reader(),
                         params={"fleet_id": dev["fleet_id"]})
    assert r.json()["meta"]["total"] == 1
