"""The devices API against a real Mosquitto configured by ``edgesync broker-config``:
register, issue a password and a certificate, download a bundle, then revoke — the device
is refused at ingest (the resolver no longer knows it) and at the broker (the API rewrote
the password file and the CRL and reloaded the broker), and gets no new credentials."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import aiomqtt
import httpx
import pytest
from broker_helpers import Deployment

from edgesync import identity
from edgesync.api import create_app
from edgesync.credentials import BrokerRefresh
from edgesync.ingest import IngestPipeline
from edgesync.protocol import RejectionCode


def idem() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


@pytest.fixture
async def api(deployment: Deployment) -> AsyncIterator[tuple[httpx.AsyncClient, str, dict]]:
    dep = deployment
    async with dep.pool.acquire() as conn:
        boot = await identity.bootstrap(conn, org=f"org-{dep.slug}", project=dep.project,
                                        topic_slug=dep.slug)
    # As `edgesync serve --broker-config-out DIR` does (the options broker-config wrote
    # there), with a reload that waits until Mosquitto has read the files.
    await dep.write_config()
    refresh = BrokerRefresh.from_dir(dep.out)
    got, want = refresh.options, dep.opts
    assert (got.mtls_port, got.password_port, got.worker_port, list(got.projects),
            list(got.extra)) == (want.mtls_port, want.password_port, want.worker_port,
                                 list(want.projects), list(want.extra))
    app = create_app(dep.pool, broker_refresh=BrokerRefresh(dep.out, refresh.options,
                                                            reload=dep.broker.reload))
    headers = {"Authorization": f"Bearer {boot.token.token}", "ORG-ID": str(boot.org_id)}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://testserver") as client:
        yield client, f"/core/api/v1/projects/{boot.project_id}", headers


async def test_register_issue_bundle_and_revoke(deployment: Deployment, api, batches) -> None:
    dep = deployment
    client, base, headers = api
    await dep.start()
    r = await client.post(f"{base}/devices", headers={**headers, **idem()},
                          json={"name": "gw-api"})
    assert r.status_code == 201, r.text
    device_id = r.json()["data"]["id"]

    r = await client.post(f"{base}/devices/{device_id}/credentials",
                          headers={**headers, **idem()}, json={"kind": "password"})
    assert r.status_code == 201, r.text
    issued = r.json()["data"]
    assert issued["username"] == "gw-api" and "reloaded" in issued["broker"]
    async with dep.device_password("gw-api", password=issued["password"]):
        pass  # the API rewrote the password file and reloaded the broker

    r = await client.post(f"{base}/devices/{device_id}/bundle", headers={**headers, **idem()},
                          json={"mqtt_url": f"ssl://127.0.0.1:{dep.opts.password_port}",
                                "auth": "password"})
    assert r.status_code == 201, r.text
    env = next(f["content"] for f in r.json()["data"]["files"] if f["name"] == "agent.env")
    url = next(line.split("=", 1)[1] for line in env.splitlines()
               if line.startswith("EDGESYNC_MQTT_URL="))
    bundle_password = url.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]
    async with dep.device_password("gw-api", password=bundle_password):
        pass  # the bundle's password replaced the first one
    listed = await client.get(f"{base}/devices/{device_id}/credentials", headers=headers)
    assert [c["revoke_reason"] for c in listed.json()["data"]] == ["rotated", None]

    r = await client.post(f"{base}/devices/{device_id}/credentials",
                          headers={**headers, **idem()}, json={"kind": "certificate"})
    assert r.status_code == 201, r.text
    cert = r.json()["data"]
    assert await dep.mtls_accepts(cert["certificate_pem"], cert["private_key_pem"])

    f = batches("t")
    payload = f.payload(f.rows(("insert", {"id": 1, "v": "x"})))
    topic = f"{dep.slug}/gw-api/sync/rows/batch"
    before = await IngestPipeline(dep.pool).handle(topic, payload)
    assert before.lineage_id is not None, before  # taken in (staged for review)

    r = await client.post(f"{base}/devices/{device_id}/revoke", headers={**headers, **idem()},
                          json={"reason": "stolen"})
    assert r.status_code == 200, r.text
    out = r.json()["data"]
    assert out["credentials_revoked"] == 2 and "reloaded" in out["broker"]
    # At the broker: the password no longer connects, the certificate is in the CRL.
    assert not await dep.mtls_accepts(cert["certificate_pem"], cert["private_key_pem"])
    with pytest.raises(aiomqtt.MqttError):
        async with dep.device_password("gw-api", password=bundle_password):
            pass
    # At ingest: a (freshly started) worker's resolver refuses the device.
    after = await IngestPipeline(dep.pool).handle(topic, f.payload(f.rows(
        ("insert", {"id": 2, "v": "y"}))))
    assert after.code == RejectionCode.UNKNOWN_DEVICE, after
    # No new credentials for a revoked device; its credentials say why.
    r = await client.post(f"{base}/devices/{device_id}/credentials",
                          headers={**headers, **idem()}, json={"kind": "password"})
    assert (r.status_code, r.json()["error"]["code"]) == (409, "DEVICE_REVOKED")
    listed = await client.get(f"{base}/devices/{device_id}/credentials", headers=headers)
    assert [c["revoke_reason"] for c in listed.json()["data"]] == ["rotated", "stolen",
                                                                   "stolen"]
