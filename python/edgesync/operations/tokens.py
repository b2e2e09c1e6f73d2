"""API tokens: issue one for a user or service account with permissions on projects,
revoke one."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from edgesync import identity
from edgesync.errors import NotFoundError
from edgesync.identity._tokens import revoke_token as _revoke_token
from edgesync.store import Conn

__all__ = ["ProjectGrant", "TokenCreated", "create_token", "revoke_token"]


@dataclass(frozen=True, slots=True)
class ProjectGrant:
    """The permissions a new token's principal holds on one project."""

    project_id: uuid.UUID
    name: str
    permissions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TokenCreated:
    """A new token (shown once) and what its principal may do (the CLI prints it as JSON,
    field by field, in this order)."""

    org_id: uuid.UUID
    principal_id: uuid.UUID
    token_id: uuid.UUID
    token: str
    expires_at: datetime | None
    projects: tuple[ProjectGrant, ...]


async def create_token(conn: Conn, *, org: str, principal: str, kind: str,
                       projects: list[str], permissions: list[str], description: str | None,
                       expires_at: datetime | None) -> TokenCreated:
    """Create the principal if new, grant it ``permissions`` on each project (by name, in
    the organization named ``org``) and issue it a token, in one transaction."""
    async with conn.transaction():
        org_id = await identity.get_org_by_name(conn, org)
        principal_id = await identity.ensure_principal(conn, org_id, principal, kind)
        grants = []
        for name in projects:
            project_id = await conn.fetchval(
                "SELECT id FROM edge_projects WHERE name = $1 AND org_id = $2", name, org_id)
            if project_id is None:
                raise NotFoundError(f"project {name!r} not found in organization {org!r}")
            for permission in permissions:
                await identity.grant(conn, principal_id, project_id, permission)
            grants.append(ProjectGrant(project_id, name, tuple(permissions)))
        issued = await identity.issue_token(conn, principal_id, description=description,
                                            expires_at=expires_at)
    return TokenCreated(org_id, principal_id, issued.id, issued.token, expires_at,
                        tuple(grants))


async def revoke_token(conn: Conn, token_id: uuid.UUID) -> uuid.UUID:
    """Revoke the token; it stops working at once."""
    revoked = await _revoke_token(conn, token_id)
    if revoked is None:
        raise NotFoundError(f"token {token_id} not found")
    assert isinstance(revoked, uuid.UUID)
    return revoked
