"""``POST /core/api/v1/projects/{project_id}/jitr/enroll`` on a FastAPI app of its own
(the lead mounts the router into the API)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from cred_helpers import Project
from cryptography import x509
from fastapi import FastAPI

from edgesync import credentials, fleet
from edgesync.api.routes.jitr import make_jitr_router
from edgesync.credentials import BootstrapSecret, make_csr, new_key
from edgesync.credentials._x509 import common_name, new_ca, signed_by


@pytest.fixture
async def client(pool: asyncpg.Pool) -> AsyncIterator[httpx.AsyncClient]:
    app = FastAPI()
    app.state.pool = pool
    app.include_router(make_jitr_router(mqtt_broker_url="ssl://mqtt.test:8883"))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://test") as c:
        yield c


async def _bootstrap(pool: asyncpg.Pool, project: Project, quota: int = 5,
                     **kw: Any) -> BootstrapSecret:
    async with pool.acquire() as conn:
        return await credentials.issue_bootstrap(conn, project.id, project.fleet_id,
                                                 max_devices=quota, **kw)


async def _enroll(client: httpx.AsyncClient, project: Project, boot_pem: str, name: str,
                  **extra: Any) -> httpx.Response:
    body = {"bootstrap_cert_pem": boot_pem, "csr_pem": make_csr(new_key(), name), **extra}
    return await client.post(f"/core/api/v1/projects/{project.id}/jitr/enroll",
                             json={k: str(v) if isinstance(v, uuid.UUID) else v
                                   for k, v in body.items()})


def _code(resp: httpx.Response) -> tuple[int, str]:
    return resp.status_code, resp.json()["error"]["code"]


async def test_enrollment_creates_the_device_and_signs_its_csr(
        client: httpx.AsyncClient, pool: asyncpg.Pool, project: Project) -> None:
    boot = await _bootstrap(pool, project)
    key = new_key()
    resp = await client.post(
        f"/core/api/v1/projects/{project.id}/jitr/enroll",
        json={"bootstrap_cert_pem": boot.cert_pem, "csr_pem": make_csr(key, "press-01"),
              "fleet_id": str(project.fleet_id), "org_id": str(project.org_id),
              "device_name": "press-01"})
    assert resp.status_code == 201, resp.text
    data = resp.json()["data"]
    assert data["device_name"] == "press-01"
    assert data["root_topic"] == f"{project.slug}/press-01"
    assert data["fleet_id"] == str(project.fleet_id)
    assert data["mqtt_broker_url"] == "ssl://mqtt.test:8883"
    cert = x509.load_pem_x509_certificate(data["certificate_pem"].encode())
    ca = x509.load_pem_x509_certificate(data["ca_pem"].encode())
    assert common_name(cert.subject) == "press-01" and signed_by(cert, ca)
    assert cert.public_key() == key.public_key()  # the key never left the "device"
    async with pool.acquire() as conn:
        scope = await fleet.get_device(conn, project.slug, "press-01")
        used = await conn.fetchval(
            "SELECT enrolled_devices FROM edge_bootstrap_certificates WHERE id = $1", boot.id)
        device_ca = await credentials.get_ca(conn, project.id, "device")
        cred = await conn.fetchrow("SELECT bootstrap_id, cert_pem FROM edge_device_credentials "
                                   "WHERE device_id = $1", scope.device_id if scope else None)
    assert scope is not None and str(scope.device_id) == data["device_id"]
    assert scope.fleet_id == project.fleet_id
    assert used == 1 and data["ca_pem"] == device_ca.cert_pem
    assert cred is not None
    assert cred["bootstrap_id"] == boot.id and cred["cert_pem"] == data["certificate_pem"]


async def test_quota_is_enforced(client: httpx.AsyncClient, pool: asyncpg.Pool,
                                 project: Project) -> None:
    boot = await _bootstrap(pool, project, quota=2)
    assert (await _enroll(client, project, boot.cert_pem, "q-1")).status_code == 201
    assert (await _enroll(client, project, boot.cert_pem, "q-2")).status_code == 201
    assert _code(await _enroll(client, project, boot.cert_pem, "q-3")) == (
        403, "BOOTSTRAP_QUOTA_EXHAUSTED")


async def test_quota_holds_under_concurrent_enrollments(
        client: httpx.AsyncClient, pool: asyncpg.Pool, project: Project) -> None:
    boot = await _bootstrap(pool, project, quota=3)
    resps = await asyncio.gather(*(_enroll(client, project, boot.cert_pem, f"c-{i}")
                                   for i in range(8)))
    statuses = sorted(r.status_code for r in resps)
    assert statuses == [201] * 3 + [403] * 5
    async with pool.acquire() as conn:
        assert await conn.fetchval(
            "SELECT count(*) FROM edge_device_credentials WHERE bootstrap_id = $1", boot.id) == 3


async def test_duplicate_name_is_409(client: httpx.AsyncClient, pool: asyncpg.Pool,
                                     project: Project) -> None:
    boot = await _bootstrap(pool, project)
    async with pool.acquire() as conn:  # pre-created, as the reference warns against
        await fleet.add_device(conn, project=project.name, name="taken",
                               topic_slug=project.slug)
    assert _code(await _enroll(client, project, boot.cert_pem, "taken")) == (
        409, "DEVICE_NAME_ALREADY_IN_USE")
    assert (await _enroll(client, project, boot.cert_pem, "fresh")).status_code == 201
    assert _code(await _enroll(client, project, boot.cert_pem, "fresh")) == (
        409, "DEVICE_NAME_ALREADY_IN_USE")
    async with pool.acquire() as conn:  # a refused enrollment used no quota
        assert await conn.fetchval("SELECT enrolled_devices FROM edge_bootstrap_certificates "
                                   "WHERE id = $1", boot.id) == 1


async def test_expired_and_not_yet_valid_bootstrap_is_refused(
        client: httpx.AsyncClient, pool: asyncpg.Pool, project: Project) -> None:
    old = await _bootstrap(pool, project, days=90,
                           now=datetime.now(UTC) - timedelta(days=91))
    assert _code(await _enroll(client, project, old.cert_pem, "late")) == (
        400, "BOOTSTRAP_CERT_EXPIRED")
    future = await _bootstrap(pool, project, now=datetime.now(UTC) + timedelta(days=2))
    assert _code(await _enroll(client, project, future.cert_pem, "early")) == (
        400, "BOOTSTRAP_CERT_EXPIRED")


async def test_revoked_bootstrap_is_refused(client: httpx.AsyncClient, pool: asyncpg.Pool,
                                            project: Project) -> None:
    boot = await _bootstrap(pool, project)
    assert (await _enroll(client, project, boot.cert_pem, "before")).status_code == 201
    async with pool.acquire() as conn:
        assert await credentials.revoke_bootstrap(conn, project.id, boot.serial) == boot.id
        listed = await credentials.list_bootstraps(conn, project.id)
        # the device it enrolled keeps its live certificate
        live = await conn.fetchval(
            "SELECT count(*) FROM edge_device_credentials WHERE bootstrap_id = $1 "
            "AND revoked_at IS NULL", boot.id)
    assert [b.status for b in listed if b.id == boot.id] == ["revoked"]
    assert live == 1
    assert _code(await _enroll(client, project, boot.cert_pem, "after")) == (
        400, "BOOTSTRAP_CERT_REVOKED")


async def test_foreign_forged_and_mismatched_bootstraps_are_refused(
        client: httpx.AsyncClient, pool: asyncpg.Pool, project: Project, unique: str) -> None:
    boot = await _bootstrap(pool, project)
    assert _code(await _enroll(client, project, "garbage", "x")) == (
        400, "INVALID_BOOTSTRAP_CERT")
    assert _code(await _enroll(client, project, boot.key_pem, "x")) == (
        400, "INVALID_BOOTSTRAP_CERT")  # the key, not the certificate
    # signed by another CA with the same name
    from edgesync.credentials._x509 import issue_leaf

    rogue_ca = new_ca(x509.load_pem_x509_certificate(boot.ca_pem.encode()).subject
                      .rfc4514_string().split("CN=")[1].split(",")[0])
    rogue = issue_leaf(rogue_ca, new_key().public_key(), "rogue", days=10)
    assert _code(await _enroll(client, project, rogue.cert_pem, "x")) == (
        400, "BOOTSTRAP_CERT_UNTRUSTED")
    # a certificate of our project CA that is not a bootstrap certificate
    async with pool.acquire() as conn:
        ca = await credentials.get_ca(conn, project.id, "project")
    stray = issue_leaf(ca, new_key().public_key(), "stray", days=10)
    assert _code(await _enroll(client, project, stray.cert_pem, "x")) == (
        400, "BOOTSTRAP_CERT_NOT_FOUND")
    # another project's bootstrap certificate, or an unknown project
    other_project = Project(uuid.uuid4(), project.org_id, "", "", project.fleet_id, "")
    assert _code(await _enroll(client, other_project, boot.cert_pem, "x")) == (
        400, "BOOTSTRAP_CERT_UNTRUSTED")
    assert _code(await _enroll(client, project, boot.cert_pem, "x", fleet_id=uuid.uuid4())) == (
        400, "BOOTSTRAP_CERT_FLEET_MISMATCH")
    assert _code(await _enroll(client, project, boot.cert_pem, "x", org_id=uuid.uuid4())) == (
        400, "BOOTSTRAP_CERT_ORG_MISMATCH")


async def test_bad_csrs_are_refused(client: httpx.AsyncClient, pool: asyncpg.Pool,
                                    project: Project) -> None:
    boot = await _bootstrap(pool, project)
    url = f"/core/api/v1/projects/{project.id}/jitr/enroll"
    bad = await client.post(url, json={"bootstrap_cert_pem": boot.cert_pem, "csr_pem": "nope"})
    assert _code(bad) == (400, "INVALID_CSR")
    for name in ("bad/name", "a+b", "#"):
        assert _code(await _enroll(client, project, boot.cert_pem, name)) == (
            400, "INVALID_CSR"), name
    assert _code(await _enroll(client, project, boot.cert_pem, "cn-1",
                               device_name="other")) == (400, "INVALID_CSR")
    missing = await client.post(url, json={"csr_pem": "x"})
    assert missing.status_code == 422
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT enrolled_devices FROM edge_bootstrap_certificates "
                                   "WHERE id = $1", boot.id) == 0


async def test_bootstrap_quota_limits(pool: asyncpg.Pool, project: Project) -> None:
    from edgesync.errors import InvalidRequestError, NotFoundError

    async with pool.acquire() as conn:
        for quota in (0, 1001):
            with pytest.raises(InvalidRequestError):
                await credentials.issue_bootstrap(conn, project.id, project.fleet_id,
                                                  max_devices=quota)
        with pytest.raises(NotFoundError):
            await credentials.issue_bootstrap(conn, project.id, uuid.uuid4(), max_devices=1)
        with pytest.raises(NotFoundError):
            await credentials.revoke_bootstrap(conn, project.id, "abc")


def test_openapi_documents_the_endpoint() -> None:
    app = FastAPI()
    app.include_router(make_jitr_router())
    doc = app.openapi()
    op = doc["paths"]["/core/api/v1/projects/{project_id}/jitr/enroll"]["post"]
    assert set(op["responses"]) == {"201", "400", "403", "409", "422"}
    assert "bootstrap_cert_pem" in doc["components"]["schemas"]["EnrollIn"]["properties"]


def test_broker_url_handed_to_devices_never_carries_credentials() -> None:
    from edgesync.api.routes.jitr import public_broker_url

    assert public_broker_url("ssl://edgesync-worker:s3cret@mqtt.example:8884") == (
        "ssl://mqtt.example:8884")
    assert public_broker_url("mqtts://[::1]:8883") == "mqtts://[::1]:8883"
    assert public_broker_url("ssl://host") == "ssl://host"
    assert public_broker_url(None) is None
