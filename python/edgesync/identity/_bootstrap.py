"""The first organization, project and admin token of a fresh install."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from edgesync.fleet import ensure_project
from edgesync.identity._orgs import attach_project, ensure_org
from edgesync.identity._permissions import MANAGE_DEVICES, READ, grant
from edgesync.identity._principals import ensure_principal
from edgesync.identity._tokens import IssuedToken, issue_token
from edgesync.store import Conn

__all__ = ["Bootstrap", "bootstrap"]


@dataclass(frozen=True, slots=True)
class Bootstrap:
    org_id: uuid.UUID
    project_id: uuid.UUID
    principal_id: uuid.UUID
    token: IssuedToken


async def bootstrap(conn: Conn, *, org: str, project: str, topic_slug: str = "",
                    admin: str = "admin") -> Bootstrap:
    """Create (or reuse) the org, the project in it and an admin user with every project
    permission, and issue a new token for that user. Safe to run again: it only adds a token."""
    async with conn.transaction():
        org_id = await ensure_org(conn, org)
        project_id = await ensure_project(conn, project, topic_slug)
        await attach_project(conn, org_id, project_id)
        principal_id = await ensure_principal(conn, org_id, admin, "user")
        for permission in (READ, MANAGE_DEVICES):
            await grant(conn, principal_id, project_id, permission)
        token = await issue_token(conn, principal_id, description="edgesync admin bootstrap")
    return Bootstrap(org_id, project_id, principal_id, token)
