"""Idempotency-Key: required on mutations, retries replay the first response and do
nothing twice, a key reused for another request is a 422."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import asyncpg
import httpx

from edgesync.api._idempotency import RETENTION


async def test_missing_key_is_a_400(client: httpx.AsyncClient, tenant,
                                    pool: asyncpg.Pool) -> None:
    r = await client.post(tenant.url("/devices"), headers=tenant.headers(), json={"name": "a"})
    assert r.status_code == 400
    assert r.json()["error"] == {"code": "IDEMPOTENCY_KEY_REQUIRED",
                                 "message": r.json()["error"]["message"],
                                 "field": "Idempotency-Key"}
    assert await pool.fetchval("SELECT count(*) FROM edge_devices WHERE project_id = $1",
                               tenant.project_id) == 0


async def test_retry_replays_the_first_response(client: httpx.AsyncClient, tenant,
                                                pool: asyncpg.Pool) -> None:
    headers = tenant.headers(**{"Idempotency-Key": "create-gw-9"})
    first = await client.post(tenant.url("/devices"), headers=headers, json={"name": "gw-9"})
    # The same JSON spelled differently is the same request.
    second = await client.post(tenant.url("/devices"), content=b'{ "name" : "gw-9" }',
                               headers={**headers, "Content-Type": "application/json"})
    assert first.status_code == second.status_code == 201
    assert first.json() == second.json()
    assert "Idempotent-Replayed" not in first.headers
    assert second.headers["Idempotent-Replayed"] == "true"
    assert await pool.fetchval("SELECT count(*) FROM edge_devices WHERE project_id = $1",
                               tenant.project_id) == 1


async def test_a_retried_claim_does_not_conflict_with_itself(client: httpx.AsyncClient,
                                                             tenant, stage) -> None:
    s = await stage(tenant)
    url = tenant.url(f"/edge/schema-reviews/{s.review_id}/claim")
    headers = tenant.headers(**{"Idempotency-Key": f"claim-{s.review_id}"})
    first = await client.post(url, headers=headers, json={"action_version": 1})
    second = await client.post(url, headers=headers, json={"action_version": 1})
    assert first.status_code == second.status_code == 200
    assert second.json()["data"]["action_version"] == 2  # claimed once
    fresh = await client.post(url, headers=tenant.headers(**{"Idempotency-Key": "new"}),
                              json={"action_version": 1})
    assert fresh.status_code == 409


async def test_error_responses_are_replayed_too(client: httpx.AsyncClient, tenant,
                                                stage) -> None:
    s = await stage(tenant)
    url = tenant.url(f"/edge/schema-reviews/{s.review_id}/approve")
    headers = tenant.headers(**{"Idempotency-Key": "approve-stale"})
    first = await client.post(url, headers=headers, json={"action_version": 2})
    assert first.status_code == 409  # stale: the review is at 1
    await client.post(tenant.url(f"/edge/schema-reviews/{s.review_id}/claim"),
                      headers=tenant.headers(**{"Idempotency-Key": "c"}),
                      json={"action_version": 1})
    second = await client.post(url, headers=headers, json={"action_version": 2})
    assert (second.status_code, second.json()) == (409, first.json())


async def test_same_key_different_request_is_a_422(client: httpx.AsyncClient, tenant,
                                                   pool: asyncpg.Pool) -> None:
    headers = tenant.headers(**{"Idempotency-Key": "k1"})
    assert (await client.post(tenant.url("/devices"), headers=headers,
                              json={"name": "gw-1"})).status_code == 201
    r = await client.post(tenant.url("/devices"), headers=headers, json={"name": "gw-2"})
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
    r = await client.patch(tenant.url("/edge/policy"), headers=headers,
                           json={"allow_additive_continue": True})
    assert r.status_code == 422
    names = [r["name"] for r in await pool.fetch(
        "SELECT name FROM edge_devices WHERE project_id = $1", tenant.project_id)]
    assert names == ["gw-1"]


async def test_keys_belong_to_their_principal(client: httpx.AsyncClient, tenant,
                                              other_tenant) -> None:
    for t in (tenant, other_tenant):
        r = await client.post(t.url("/devices"), json={"name": "gw-1"},
                              headers=t.headers(**{"Idempotency-Key": "shared"}))
        assert r.status_code == 201
        assert r.json()["data"]["project_id"] == str(t.project_id)


async def test_concurrent_retries_apply_once(client: httpx.AsyncClient, tenant,
                                             pool: asyncpg.Pool) -> None:
    headers = tenant.headers(**{"Idempotency-Key": str(uuid.uuid4())})
    results = await asyncio.gather(*[
        client.post(tenant.url("/devices"), headers=headers, json={"name": "gw-c"})
        for _ in range(5)])
    assert {r.status_code for r in results} == {201}
    assert len({r.text for r in results}) == 1
    assert await pool.fetchval("SELECT count(*) FROM edge_devices WHERE project_id = $1",
                               tenant.project_id) == 1


async def test_a_key_is_free_again_after_the_retention(client: httpx.AsyncClient, tenant,
                                                       pool: asyncpg.Pool) -> None:
    headers = tenant.headers(**{"Idempotency-Key": "daily-1"})
    assert (await client.post(tenant.url("/devices"), headers=headers,
                              json={"name": "gw-old"})).status_code == 201
    await pool.execute("UPDATE edge_idempotency_keys SET created_at = now() - $1::interval "
                       "WHERE idempotency_key = 'daily-1'", RETENTION + timedelta(minutes=1))
    r = await client.post(tenant.url("/devices"), headers=headers, json={"name": "gw-new"})
    assert r.status_code == 201 and "Idempotent-Replayed" not in r.headers
    # The record now is the new request's: a retry of it replays, the old one is a 422.
    again = await client.post(tenant.url("/devices"), headers=headers, json={"name": "gw-new"})
    assert again.headers["Idempotent-Replayed"] == "true" and again.json() == r.json()
    old = await client.post(tenant.url("/devices"), headers=headers, json={"name": "gw-old"})
    assert old.status_code == 422


async def test_mutations_sweep_expired_records(client: httpx.AsyncClient, tenant,
                                               pool: asyncpg.Pool) -> None:
    key = str(uuid.uuid4())
    r = await client.post(tenant.url("/devices"), json={"name": "gw-sweep"},
                          headers=tenant.headers(**{"Idempotency-Key": key}))
    assert r.status_code == 201
    principal = await pool.fetchval(
        "SELECT principal_id FROM edge_idempotency_keys WHERE idempotency_key = $1", key)
    await pool.execute(
        "INSERT INTO edge_idempotency_keys (principal_id, idempotency_key, request_hash, "
        "method, path, status_code, response_body, created_at) "
        "SELECT $1, 'expired-' || g, '\\x00', 'POST', '/x', 201, '{}', now() - $2::interval "
        "FROM generate_series(1, 150) g", principal, RETENTION + timedelta(hours=1))

    async def expired() -> int:
        return int(await pool.fetchval(
            "SELECT count(*) FROM edge_idempotency_keys WHERE created_at <= now() - $1::interval",
            RETENTION))

    assert await expired() >= 150
    for n in range(3):
        r = await client.post(tenant.url("/devices"), json={"name": f"gw-sweep-{n}"},
                              headers=tenant.headers(**{"Idempotency-Key": str(uuid.uuid4())}))
        assert r.status_code == 201
    assert await expired() == 0
