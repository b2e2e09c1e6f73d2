"""The devices routes without a broker: issuing credentials (secrets once, not in the
idempotency record), and a revocation that the same server's ingest obeys at once."""

from __future__ import annotations

import uuid

import asyncpg
import httpx

from edgesync import fleet
from edgesync.api import create_app
from edgesync.fleet import DeviceResolver
from edgesync.ingest import IngestPipeline
from edgesync.protocol import RejectionCode


def idem() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


async def test_credentials_once_and_revocation_at_ingest(tenant, pool: asyncpg.Pool,
                                                         batches) -> None:
    resolver = DeviceResolver(pool)
    pipeline = IngestPipeline(pool, resolver)
    app = create_app(pool, device_revoked=resolver.forget)
    async with (pool.acquire() as conn,
                httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                  base_url="http://testserver") as client):
        dev = await fleet.add_device(conn, project=tenant.project_name, name="gw-rv",
                                     topic_slug=tenant.slug)
        url = tenant.url(f"/devices/{dev.device_id}")
        r = await client.post(f"{url}/credentials", headers=tenant.headers(**idem()),
                              json={"kind": "password", "csr_pem": "x"})
        assert (r.status_code, r.json()["error"]["field"]) == (422, "csr_pem")
        key = idem()
        r = await client.post(f"{url}/credentials", headers=tenant.headers(**key),
                              json={"kind": "certificate"})
        assert r.status_code == 201, r.text
        assert "PRIVATE KEY" in r.json()["data"]["private_key_pem"]
        again = await client.post(f"{url}/credentials", headers=tenant.headers(**key),
                                  json={"kind": "certificate"})
        assert again.json()["data"]["private_key_pem"].startswith("shown once")
        assert again.json()["data"]["credential_id"] == r.json()["data"]["credential_id"]

        f = batches("t")
        topic = f"{dev.root_topic}/sync/rows/batch"
        first = await pipeline.handle(topic, f.payload(f.rows(("insert", {"id": 1}))))
        assert first.lineage_id is not None  # resolved, and now cached
        r = await client.post(f"{url}/revoke", headers=tenant.headers(**idem()), json={})
        assert r.status_code == 200, r.text
        assert r.json()["data"]["credentials_revoked"] == 1
        assert "broker-config" in r.json()["data"]["broker"]  # this app manages no broker
        after = await pipeline.handle(topic, f.payload(f.rows(("insert", {"id": 2}))))
        assert after.code == RejectionCode.UNKNOWN_DEVICE, after
        again = await client.post(f"{url}/revoke", headers=tenant.headers(**idem()), json={})
        assert again.json()["data"]["revoked_at"] == r.json()["data"]["revoked_at"]
        listed = await client.get(tenant.url("/devices"), headers=tenant.headers())
        (row,) = [d for d in listed.json()["data"] if d["id"] == str(dev.device_id)]
        assert row["revoked_at"] == r.json()["data"]["revoked_at"]
        one = await client.get(url, headers=tenant.headers())
        assert one.json()["data"] == row
        missing = await client.get(tenant.url(f"/devices/{uuid.uuid4()}"), headers=tenant.headers())
        assert (missing.status_code, missing.json()["error"]["code"]) == (404, "DEVICE_NOT_FOUND")
        bundle = await client.post(f"{url}/bundle", headers=tenant.headers(**idem()),
                                   json={"mqtt_url": "ssl://b.example:8883"})
        assert (bundle.status_code, bundle.json()["error"]["code"]) == (409, "DEVICE_REVOKED")
