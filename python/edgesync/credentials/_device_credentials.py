"""Per-device MQTT credentials: a password (username = device name) or an mTLS client
certificate (CN = device name, signed by the project's device CA). Secrets are returned
once; the database keeps the password hash and the certificate, never a private key."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey

from edgesync import fleet
from edgesync._defaults import DEVICE_CERT_DAYS
from edgesync.credentials._authorities import get_ca
from edgesync.credentials._passwords import hash_password, new_password
from edgesync.credentials._x509 import (
    common_name,
    issue_leaf,
    load_csr,
    new_key,
    private_key_pem,
)
from edgesync.errors import ConflictError, InvalidRequestError, NotFoundError
from edgesync.fleet import DeviceScope
from edgesync.store import Conn, from_record

__all__ = [
    "DEVICE_CERT_DAYS",
    "CertificateSecret",
    "DeviceCredential",
    "PasswordSecret",
    "find_device",
    "find_project",
    "issue_certificate",
    "issue_password",
    "list_credentials",
    "revoke_credentials",
]


@dataclass(frozen=True, slots=True)
class PasswordSecret:
    credential_id: uuid.UUID
    username: str
    password: str  # shown once


@dataclass(frozen=True, slots=True)
class CertificateSecret:
    credential_id: uuid.UUID
    cert_pem: str
    key_pem: str | None  # shown once; None when the device sent a CSR
    device_ca_pem: str
    serial: str
    not_after: datetime


@dataclass(frozen=True, slots=True)
class DeviceCredential:
    """A device's credential as listed (no secret: the database keeps none)."""

    id: uuid.UUID
    kind: str  # password | certificate
    cert_serial: str | None
    cert_fingerprint: str | None
    not_after: datetime | None
    bootstrap_id: uuid.UUID | None  # the bootstrap certificate it enrolled with (JITR)
    created_at: datetime
    revoked_at: datetime | None
    revoke_reason: str | None


async def find_project(conn: Conn, project: str) -> Any:
    """The project (id, name, topic_slug, org_id) named ``project``, or with that id: the
    API and the operator commands name projects by id, the bootstrap commands by name, and
    either works here. None when there is none."""
    try:
        project_id: uuid.UUID | None = uuid.UUID(project)
    except ValueError:
        project_id = None
    return await conn.fetchrow(
        "SELECT id, name, topic_slug, org_id FROM edge_projects WHERE name = $1 OR id = $2 "
        "ORDER BY (id = $2) DESC LIMIT 1", project, project_id)


async def find_device(conn: Conn, project: str, name: str) -> DeviceScope:
    """The device ``name`` of ``project`` (a project name or id)."""
    row = await find_project(conn, project)
    scope = None if row is None else await fleet.get_device(conn, row["topic_slug"], name)
    if scope is None:
        raise NotFoundError(f"no device {name!r} in project {project!r}")
    return scope


async def _not_revoked(conn: Conn, scope: DeviceScope) -> None:
    if await conn.fetchval("SELECT revoked_at IS NOT NULL FROM edge_devices WHERE id = $1",
                           scope.device_id):
        raise ConflictError(f"device {scope.device_name!r} is revoked: it gets no new "
                            "credentials")


async def issue_password(conn: Conn, scope: DeviceScope) -> PasswordSecret:
    """A new password for the device; its previous password (if any) is revoked."""
    await _not_revoked(conn, scope)
    password = new_password()
    cred_id = uuid.uuid4()
    async with conn.transaction():
        await conn.execute(
            "UPDATE edge_device_credentials SET revoked_at = now(), revoke_reason = 'rotated' "
            "WHERE device_id = $1 AND kind = 'password' AND revoked_at IS NULL", scope.device_id)
        await conn.execute(
            "INSERT INTO edge_device_credentials (id, device_id, kind, password_hash) "
            "VALUES ($1, $2, 'password', $3)", cred_id, scope.device_id, hash_password(password))
    return PasswordSecret(cred_id, scope.device_name, password)


async def issue_certificate(conn: Conn, scope: DeviceScope, *, csr_pem: str | None = None,
                            days: int = DEVICE_CERT_DAYS,
                            bootstrap_id: uuid.UUID | None = None) -> CertificateSecret:
    """An mTLS client certificate for the device. Without a CSR the key pair is made
    here and returned once; with one, the CSR's CN must be the device name."""
    await _not_revoked(conn, scope)
    key: EllipticCurvePrivateKey | None = None
    if csr_pem is None:
        key = new_key()
        public: Any = key.public_key()
    else:
        csr = load_csr(csr_pem)
        if common_name(csr.subject) != scope.device_name:
            raise InvalidRequestError("csr_pem", f"the CSR's CN must be {scope.device_name!r}")
        public = csr.public_key()
    ca = await get_ca(conn, scope.project_id, "device")
    issued = issue_leaf(ca, public, scope.device_name, days=days)
    cred_id = uuid.uuid4()
    await conn.execute(
        "INSERT INTO edge_device_credentials (id, device_id, kind, cert_serial, cert_fingerprint, "
        "cert_pem, not_after, bootstrap_id) VALUES ($1, $2, 'certificate', $3, $4, $5, $6, $7)",
        cred_id, scope.device_id, issued.serial_hex, issued.fingerprint, issued.cert_pem,
        issued.not_after, bootstrap_id)
    return CertificateSecret(cred_id, issued.cert_pem, private_key_pem(key) if key else None,
                             ca.cert_pem, issued.serial_hex, issued.not_after)


async def list_credentials(conn: Conn, device_id: uuid.UUID) -> list[DeviceCredential]:
    rows = await conn.fetch(
        "SELECT id, kind, cert_serial, cert_fingerprint, not_after, bootstrap_id, created_at, "
        "revoked_at, revoke_reason FROM edge_device_credentials WHERE device_id = $1 "
        "ORDER BY created_at, id", device_id)
    return [from_record(DeviceCredential, r) for r in rows]


async def revoke_credentials(conn: Conn, device_id: uuid.UUID, *,
                             credential_id: uuid.UUID | None = None,
                             reason: str = "revoked") -> int:
    """Revoke one credential of the device, or all its live ones; returns how many.

    The broker learns of it when its files are written again (``edgesync broker-config``)
    and it reloads them: see docs/security.md."""
    result = await conn.execute(
        "UPDATE edge_device_credentials SET revoked_at = now(), revoke_reason = $3 "
        "WHERE device_id = $1 AND revoked_at IS NULL AND ($2::uuid IS NULL OR id = $2)",
        device_id, credential_id, reason)
    count = int(result.split()[-1])
    if credential_id is not None and count == 0:
        raise NotFoundError(f"no live credential {credential_id} for this device")
    return count
