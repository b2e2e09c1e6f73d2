"""JITR fleet bootstrap certificates: issued by the project CA with a device quota and an
expiry; the private key is returned once and never stored. Revoking one stops new
enrollments; devices already enrolled keep their own certificates."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from edgesync._defaults import BOOTSTRAP_DAYS
from edgesync.credentials._authorities import get_ca
from edgesync.credentials._x509 import issue_leaf, new_key, private_key_pem
from edgesync.errors import InvalidRequestError, NotFoundError
from edgesync.store import Conn, from_record

__all__ = ["BOOTSTRAP_DAYS", "BootstrapCertificate", "BootstrapSecret", "count_enrollment",
           "issue_bootstrap", "list_bootstraps", "revoke_bootstrap"]

MAX_QUOTA = 1000


@dataclass(frozen=True, slots=True)
class BootstrapSecret:
    id: uuid.UUID
    project_id: uuid.UUID
    fleet_id: uuid.UUID
    serial: str
    cert_pem: str
    key_pem: str  # shown once
    ca_pem: str
    max_devices: int
    not_after: datetime


@dataclass(frozen=True, slots=True)
class BootstrapCertificate:
    """A bootstrap certificate as listed (no key: it was shown once)."""

    id: uuid.UUID
    serial: str
    fleet: str  # the fleet's name
    fleet_id: uuid.UUID
    max_devices: int
    enrolled_devices: int
    not_after: datetime
    created_at: datetime
    revoked_at: datetime | None
    status: str  # active | expired | revoked


async def issue_bootstrap(conn: Conn, project_id: uuid.UUID, fleet_id: uuid.UUID, *,
                          max_devices: int, days: int = BOOTSTRAP_DAYS,
                          now: datetime | None = None) -> BootstrapSecret:
    if not 1 <= max_devices <= MAX_QUOTA:
        raise InvalidRequestError("max_devices", f"must be between 1 and {MAX_QUOTA}")
    if days < 1:
        raise InvalidRequestError("days", "must be at least 1")
    fleet = await conn.fetchval(
        "SELECT name FROM edge_fleets WHERE id = $1 AND project_id = $2", fleet_id, project_id)
    if fleet is None:
        raise NotFoundError(f"fleet {fleet_id} is not in project {project_id}")
    ca = await get_ca(conn, project_id, "project")
    key = new_key()
    issued = issue_leaf(ca, key.public_key(), f"edgesync bootstrap: {fleet}"[:64], days=days,
                        now=now)
    boot_id = uuid.uuid4()
    await conn.execute(
        "INSERT INTO edge_bootstrap_certificates (id, project_id, fleet_id, serial, fingerprint, "
        "cert_pem, max_devices, not_after) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        boot_id, project_id, fleet_id, issued.serial_hex, issued.fingerprint, issued.cert_pem,
        max_devices, issued.not_after)
    return BootstrapSecret(boot_id, project_id, fleet_id, issued.serial_hex, issued.cert_pem,
                           private_key_pem(key), ca.cert_pem, max_devices, issued.not_after)


async def list_bootstraps(conn: Conn, project_id: uuid.UUID) -> list[BootstrapCertificate]:
    rows = await conn.fetch(
        "SELECT b.id, b.serial, f.name AS fleet, b.fleet_id, b.max_devices, b.enrolled_devices, "
        "b.not_after, b.created_at, b.revoked_at, "
        "CASE WHEN b.revoked_at IS NOT NULL THEN 'revoked' WHEN b.not_after <= now() "
        "THEN 'expired' ELSE 'active' END AS status "
        "FROM edge_bootstrap_certificates b JOIN edge_fleets f ON f.id = b.fleet_id "
        "WHERE b.project_id = $1 ORDER BY b.created_at, b.id", project_id)
    return [from_record(BootstrapCertificate, r) for r in rows]


async def revoke_bootstrap(conn: Conn, project_id: uuid.UUID, ref: str) -> uuid.UUID:
    """Revoke by id or serial (hex); revoking twice is harmless."""
    try:
        by_id: uuid.UUID | None = uuid.UUID(ref)
    except ValueError:
        by_id = None
    found = await conn.fetchval(
        "UPDATE edge_bootstrap_certificates SET revoked_at = coalesce(revoked_at, now()) "
        "WHERE project_id = $1 AND (id = $2 OR serial = lower($3)) RETURNING id",
        project_id, by_id, ref)
    if found is None:
        raise NotFoundError(f"no bootstrap certificate {ref!r} in this project")
    return uuid.UUID(str(found))


async def count_enrollment(conn: Conn, bootstrap_id: uuid.UUID) -> None:
    """One more device enrolled with the bootstrap certificate."""
    await conn.execute("UPDATE edge_bootstrap_certificates "
                       "SET enrolled_devices = enrolled_devices + 1 WHERE id = $1", bootstrap_id)
