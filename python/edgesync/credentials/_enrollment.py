"""JITR enrollment: a device presents the fleet bootstrap certificate and a CSR made on
the device; it gets a device record and a device certificate.

Checks, in order (the first failure is the answer):

===  =================================  ==========================================
400  INVALID_BOOTSTRAP_CERT             not a PEM certificate
400  BOOTSTRAP_CERT_UNTRUSTED           not signed by this project's CA
400  BOOTSTRAP_CERT_EXPIRED             outside its validity window
400  INVALID_CSR                        bad PEM, bad signature, weak key, bad CN
400  BOOTSTRAP_CERT_NOT_FOUND           not a certificate this project issued
400  BOOTSTRAP_CERT_REVOKED             revoked
400  BOOTSTRAP_CERT_FLEET_MISMATCH      ``fleet_id`` given and not the certificate's
400  BOOTSTRAP_CERT_ORG_MISMATCH        ``org_id`` given and not the project's
403  BOOTSTRAP_QUOTA_EXHAUSTED          ``max_devices`` devices already enrolled
409  DEVICE_NAME_ALREADY_IN_USE         a device of that name exists in the project
===  =================================  ==========================================

Enrollments through one bootstrap certificate are serialized by a row lock on it, so
the quota holds under concurrency; the device, its certificate and the quota count are
one transaction.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from edgesync import fleet
from edgesync.credentials._bootstrap import count_enrollment
from edgesync.credentials._device_credentials import (
    DEVICE_CERT_DAYS,
    CertificateSecret,
    issue_certificate,
)
from edgesync.credentials._x509 import (
    CaMaterial,
    cert_fingerprint,
    cert_serial_hex,
    common_name,
    load_cert,
    load_csr,
    signed_by,
)
from edgesync.errors import (
    ApiErrorCode,
    ConfigError,
    ConflictError,
    EnrollmentError,
    InvalidRequestError,
)
from edgesync.store import Conn

__all__ = ["Enrollment", "EnrollmentError", "enroll"]


@dataclass(frozen=True, slots=True)
class Enrollment:
    device_id: uuid.UUID
    device_name: str
    project_id: uuid.UUID
    fleet_id: uuid.UUID
    root_topic: str
    bootstrap_id: uuid.UUID
    certificate: CertificateSecret


def _bad(code: ApiErrorCode, message: str, field: str = "bootstrap_cert_pem") -> EnrollmentError:
    return EnrollmentError(400, code, message, field)


async def _project_ca(conn: Conn, project_id: uuid.UUID) -> CaMaterial | None:
    row = await conn.fetchrow(
        "SELECT cert_pem, key_pem FROM edge_certificate_authorities "
        "WHERE project_id = $1 AND purpose = 'project'", project_id)
    return CaMaterial(row["cert_pem"], row["key_pem"]) if row else None


async def enroll(conn: Conn, project_id: uuid.UUID, *, bootstrap_cert_pem: str, csr_pem: str,
                 fleet_id: uuid.UUID | None = None, org_id: uuid.UUID | None = None,
                 device_name: str | None = None, days: int = DEVICE_CERT_DAYS,
                 now: datetime | None = None) -> Enrollment:
    now = now or datetime.now(UTC)
    try:
        boot = load_cert(bootstrap_cert_pem, "bootstrap_cert_pem")
    except InvalidRequestError as exc:
        raise _bad(ApiErrorCode.INVALID_BOOTSTRAP_CERT, exc.reason) from exc
    # An unknown project answers like a foreign certificate: nothing leaks to a caller
    # that holds no bootstrap certificate of it.
    ca = await _project_ca(conn, project_id)
    if ca is None or not signed_by(boot, ca.cert):
        raise _bad(ApiErrorCode.BOOTSTRAP_CERT_UNTRUSTED,
                   "bootstrap certificate not signed by this CA")
    if not boot.not_valid_before_utc <= now < boot.not_valid_after_utc:
        raise _bad(ApiErrorCode.BOOTSTRAP_CERT_EXPIRED,
                   "bootstrap certificate is outside its validity window")
    try:
        csr = load_csr(csr_pem)
    except InvalidRequestError as exc:
        raise _bad(ApiErrorCode.INVALID_CSR, exc.reason, "csr_pem") from exc
    name = common_name(csr.subject)
    if not name:
        raise _bad(ApiErrorCode.INVALID_CSR,
                   "the CSR must carry exactly one CN (the device name)", "csr_pem")
    if device_name is not None and device_name != name:
        raise _bad(ApiErrorCode.INVALID_CSR,
                   f"the CSR's CN {name!r} is not device_name {device_name!r}",
                   "csr_pem")

    async with conn.transaction():
        row = await conn.fetchrow(
            "SELECT b.id, b.fleet_id, b.fingerprint, b.revoked_at, b.max_devices, "
            "b.enrolled_devices, f.name AS fleet, p.name AS project, p.topic_slug, p.org_id "
            "FROM edge_bootstrap_certificates b JOIN edge_fleets f ON f.id = b.fleet_id "
            "JOIN edge_projects p ON p.id = b.project_id "
            "WHERE b.project_id = $1 AND b.serial = $2 FOR UPDATE OF b",
            project_id, cert_serial_hex(boot))
        if row is None or row["fingerprint"] != cert_fingerprint(boot):
            raise _bad(ApiErrorCode.BOOTSTRAP_CERT_NOT_FOUND, "bootstrap certificate not found")
        if row["revoked_at"] is not None:
            raise _bad(ApiErrorCode.BOOTSTRAP_CERT_REVOKED,
                       "bootstrap certificate is not active (revoked)")
        if fleet_id is not None and fleet_id != row["fleet_id"]:
            raise _bad(ApiErrorCode.BOOTSTRAP_CERT_FLEET_MISMATCH,
                       "fleet_id does not match the bootstrap certificate", "fleet_id")
        if org_id is not None and org_id != row["org_id"]:
            raise _bad(ApiErrorCode.BOOTSTRAP_CERT_ORG_MISMATCH,
                       "org_id does not match the bootstrap certificate", "org_id")
        if row["enrolled_devices"] >= row["max_devices"]:
            raise EnrollmentError(403, ApiErrorCode.BOOTSTRAP_QUOTA_EXHAUSTED,
                                  f"this bootstrap certificate enrolled its "
                                  f"{row['max_devices']} devices")
        try:
            scope = await fleet.add_device(conn, project=row["project"], name=name,
                                           topic_slug=row["topic_slug"], fleet=row["fleet"])
        except ConflictError as exc:
            raise EnrollmentError(409, ApiErrorCode.DEVICE_NAME_ALREADY_IN_USE,
                                  f"a device named {name!r} already exists in the project",
                                  "csr_pem") from exc
        except ConfigError as exc:
            raise _bad(ApiErrorCode.INVALID_CSR, exc.reason, "csr_pem") from exc
        cert = await issue_certificate(conn, scope, csr_pem=csr_pem, days=days,
                                       bootstrap_id=row["id"])
        await count_enrollment(conn, row["id"])
    assert scope.fleet_id is not None
    return Enrollment(scope.device_id, scope.device_name, scope.project_id, scope.fleet_id,
                      scope.root_topic, row["id"], cert)
