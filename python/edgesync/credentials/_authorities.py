"""The certificate authorities kept in the database, created on first need.

``server`` (one per deployment) signs broker server certificates; ``project`` (one per
project) signs JITR bootstrap certificates; ``device`` (one per project) signs device
client certificates and is the only CA a project's mTLS listener trusts, so neither a
bootstrap certificate nor another project's device can log in as one of its devices.
"""

from __future__ import annotations

import uuid
from typing import Literal

from edgesync.credentials._x509 import CaMaterial, new_ca
from edgesync.errors import NotFoundError
from edgesync.store import Conn

__all__ = ["Purpose", "get_ca", "next_crl_number", "server_ca"]

Purpose = Literal["project", "device"]


async def _project_label(conn: Conn, project_id: uuid.UUID) -> str:
    row = await conn.fetchrow("SELECT name FROM edge_projects WHERE id = $1", project_id)
    if row is None:
        raise NotFoundError(f"project {project_id} does not exist")
    return str(row["name"])


async def get_ca(conn: Conn, project_id: uuid.UUID, purpose: Purpose) -> CaMaterial:
    """The project's CA of ``purpose``, created (key and self-signed cert) if missing."""
    sql = ("SELECT cert_pem, key_pem FROM edge_certificate_authorities "
           "WHERE project_id = $1 AND purpose = $2")
    row = await conn.fetchrow(sql, project_id, purpose)
    if row is None:
        label = await _project_label(conn, project_id)
        ca = new_ca(f"edgesync {purpose} CA: {label}"[:64])
        # Two first callers race harmlessly: one insert wins, both read the winner.
        await conn.execute(
            "INSERT INTO edge_certificate_authorities (id, project_id, purpose, cert_pem, key_pem) "
            "VALUES ($1, $2, $3, $4, $5) "
            "ON CONFLICT (project_id, purpose) WHERE project_id IS NOT NULL DO NOTHING",
            uuid.uuid4(), project_id, purpose, ca.cert_pem, ca.key_pem)
        row = await conn.fetchrow(sql, project_id, purpose)
    assert row is not None
    return CaMaterial(row["cert_pem"], row["key_pem"])


async def server_ca(conn: Conn) -> CaMaterial:
    """The deployment's broker-server CA, created if missing."""
    sql = ("SELECT cert_pem, key_pem FROM edge_certificate_authorities "
           "WHERE project_id IS NULL AND purpose = 'server'")
    row = await conn.fetchrow(sql)
    if row is None:
        ca = new_ca("edgesync broker server CA")
        await conn.execute(
            "INSERT INTO edge_certificate_authorities (id, project_id, purpose, cert_pem, key_pem) "
            "VALUES ($1, NULL, 'server', $2, $3) "
            "ON CONFLICT (purpose) WHERE project_id IS NULL DO NOTHING",
            uuid.uuid4(), ca.cert_pem, ca.key_pem)
        row = await conn.fetchrow(sql)
    assert row is not None
    return CaMaterial(row["cert_pem"], row["key_pem"])


async def next_crl_number(conn: Conn, project_id: uuid.UUID) -> int:
    """The number of the project's next device CRL."""
    return int(await conn.fetchval(
        "UPDATE edge_certificate_authorities SET crl_number = crl_number + 1 "
        "WHERE project_id = $1 AND purpose = 'device' RETURNING crl_number", project_id))
