"""Organizations, and which organization a project belongs to."""

from __future__ import annotations

import re
import uuid

from edgesync.errors import ConflictError, InvalidRequestError, NotFoundError
from edgesync.fleet import adopt_project
from edgesync.store import Conn

__all__ = ["attach_project", "ensure_org", "get_org_by_name"]

_ORG_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,99}$")


async def ensure_org(conn: Conn, name: str) -> uuid.UUID:
    if not _ORG_NAME.match(name):
        raise InvalidRequestError("org", f"organization name {name!r} must match "
                                         f"{_ORG_NAME.pattern}")
    org_id = await conn.fetchval(
        "INSERT INTO edge_organizations (id, name) VALUES ($1, $2) "
        "ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING id",
        uuid.uuid4(), name)
    return uuid.UUID(str(org_id))


async def get_org_by_name(conn: Conn, name: str) -> uuid.UUID:
    org_id = await conn.fetchval("SELECT id FROM edge_organizations WHERE name = $1", name)
    if org_id is None:
        raise NotFoundError(f"organization {name!r} not found")
    return uuid.UUID(str(org_id))


async def attach_project(conn: Conn, org_id: uuid.UUID, project_id: uuid.UUID) -> None:
    """Make the project part of the organization (adopting it if it has none yet)."""
    owner = await adopt_project(conn, project_id, org_id)
    if owner is None:
        raise NotFoundError(f"project {project_id} not found")
    if owner != org_id:
        raise ConflictError(f"project {project_id} belongs to another organization")
