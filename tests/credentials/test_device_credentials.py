"""Issuing, listing and revoking device credentials in the database."""

from __future__ import annotations

import dataclasses

import asyncpg
import pytest
from cred_helpers import Project
from cryptography import x509

from edgesync import credentials, fleet
from edgesync.credentials import make_csr, new_key, verify_password
from edgesync.credentials._x509 import common_name, signed_by
from edgesync.errors import InvalidRequestError, NotFoundError


async def test_password_is_hashed_and_rotation_revokes_the_old_one(
        pool: asyncpg.Pool, project: Project) -> None:
    async with pool.acquire() as conn:
        scope = await fleet.add_device(conn, project=project.name, name="gw-1",
                                       topic_slug=project.slug)
        first = await credentials.issue_password(conn, scope)
        second = await credentials.issue_password(conn, scope)
        rows = await conn.fetch(
            "SELECT id, password_hash, revoked_at, revoke_reason FROM edge_device_credentials "
            "WHERE device_id = $1 ORDER BY created_at", scope.device_id)
    assert first.username == second.username == "gw-1"
    by_id = {r["id"]: r for r in rows}
    assert by_id[first.credential_id]["revoke_reason"] == "rotated"
    assert by_id[second.credential_id]["revoked_at"] is None
    stored = by_id[second.credential_id]["password_hash"]
    assert second.password not in stored and verify_password(second.password, stored)


async def test_certificate_with_server_key_or_csr(pool: asyncpg.Pool, project: Project) -> None:
    async with pool.acquire() as conn:
        scope = await fleet.add_device(conn, project=project.name, name="gw-2",
                                       topic_slug=project.slug)
        made = await credentials.issue_certificate(conn, scope)
        key = new_key()
        signed = await credentials.issue_certificate(conn, scope, csr_pem=make_csr(key, "gw-2"))
        with pytest.raises(InvalidRequestError, match="CN"):
            await credentials.issue_certificate(conn, scope, csr_pem=make_csr(key, "gw-3"))
        stored = await conn.fetchval(
            "SELECT count(*) FROM edge_device_credentials WHERE device_id = $1 "
            "AND cert_pem IS NOT NULL", scope.device_id)
        listed = await credentials.list_credentials(conn, scope.device_id)
    assert made.key_pem is not None and signed.key_pem is None
    assert stored == 2 and len(listed) == 2
    assert all("key" not in f.name for row in listed for f in dataclasses.fields(row))
    ca = x509.load_pem_x509_certificate(made.device_ca_pem.encode())
    for secret in (made, signed):
        cert = x509.load_pem_x509_certificate(secret.cert_pem.encode())
        assert common_name(cert.subject) == "gw-2" and signed_by(cert, ca)
    signed_cert = x509.load_pem_x509_certificate(signed.cert_pem.encode())
    assert signed_cert.public_key() == key.public_key()


async def test_device_ca_is_per_project_and_not_the_project_ca(
        pool: asyncpg.Pool, project: Project, unique: str) -> None:
    async with pool.acquire() as conn:
        device_ca = await credentials.get_ca(conn, project.id, "device")
        project_ca = await credentials.get_ca(conn, project.id, "project")
        again = await credentials.get_ca(conn, project.id, "device")
        other = await fleet.add_device(conn, project=f"other-{unique}", name="x",
                                       topic_slug=f"o{unique}")
        other_ca = await credentials.get_ca(conn, other.project_id, "device")
    assert device_ca == again
    assert len({device_ca.cert_pem, project_ca.cert_pem, other_ca.cert_pem}) == 3


async def test_revoke_one_or_all(pool: asyncpg.Pool, project: Project) -> None:
    async with pool.acquire() as conn:
        scope = await fleet.add_device(conn, project=project.name, name="gw-4",
                                       topic_slug=project.slug)
        a = await credentials.issue_certificate(conn, scope)
        await credentials.issue_certificate(conn, scope)
        await credentials.issue_password(conn, scope)
        assert await credentials.revoke_credentials(conn, scope.device_id,
                                                    credential_id=a.credential_id) == 1
        with pytest.raises(NotFoundError):
            await credentials.revoke_credentials(conn, scope.device_id,
                                                 credential_id=a.credential_id)
        assert await credentials.revoke_credentials(conn, scope.device_id) == 2
        assert await credentials.revoke_credentials(conn, scope.device_id) == 0


async def test_find_device(pool: asyncpg.Pool, project: Project) -> None:
    async with pool.acquire() as conn:
        await fleet.add_device(conn, project=project.name, name="gw-5",
                               topic_slug=project.slug)
        found = await credentials.find_device(conn, project.name, "gw-5")
        assert found.root_topic == f"{project.slug}/gw-5"
        with pytest.raises(NotFoundError):
            await credentials.find_device(conn, project.name, "nope")
        with pytest.raises(NotFoundError):
            await credentials.find_device(conn, "no-such-project", "gw-5")
