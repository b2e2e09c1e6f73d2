"""Who is calling, and may they touch this project?

``Authorization: Bearer <token>`` names a principal; the ``ORG-ID`` header names the
organization the call acts in. A project is visible only when it belongs to that
organization, the principal is a member of it and holds a permission on the project;
anything else is a 404, so a token never learns that another tenant's object exists.
A project the principal can read but not manage answers 403 to a mutation.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from edgesync.api._db import pool_of
from edgesync.api._errors import ApiError
from edgesync.errors import ApiErrorCode
from edgesync.identity import MANAGE_DEVICES, READ, Principal, authenticate

__all__ = ["Access", "CanManage", "CanRead", "Member", "resolve_access", "resolve_principal"]

_bearer = HTTPBearer(auto_error=False, description="an edgesync API token (`esk_…`)")


@dataclass(frozen=True, slots=True)
class Access:
    principal: Principal
    org_id: uuid.UUID
    project_id: uuid.UUID

    @property
    def actor(self) -> str:
        """How decisions by this caller are recorded (``claimed_by``, ``decided_by``)."""
        return self.principal.name


def _not_found() -> ApiError:
    return ApiError(404, ApiErrorCode.PROJECT_NOT_FOUND, "project not found")


async def resolve_principal(request: Request, token: str | None, org_header: str | None
                            ) -> tuple[Principal, uuid.UUID]:
    """The token's principal and the ``ORG-ID`` organization, which must be its own."""
    if not token:
        raise ApiError(401, ApiErrorCode.UNAUTHENTICATED,
                       "an Authorization: Bearer token is required",
                       headers={"WWW-Authenticate": "Bearer"})
    if not org_header:
        raise ApiError(400, ApiErrorCode.ORG_ID_REQUIRED, "the ORG-ID header is required", "ORG-ID")
    try:
        org_id = uuid.UUID(org_header)
    except ValueError:
        raise ApiError(400, ApiErrorCode.INVALID_ORG_ID, "the ORG-ID header must be a UUID",
                       "ORG-ID") from None
    async with pool_of(request).acquire() as conn:
        principal = await authenticate(conn, token)
    if principal is None:
        raise ApiError(401, ApiErrorCode.UNAUTHENTICATED,
                       "the token is unknown, expired or revoked",
                       headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
    if principal.org_id != org_id:
        # The token's own organization is no other tenant's secret, and "project not
        # found" sent operators looking for a project that was there (issue 27).
        raise ApiError(403, ApiErrorCode.ORG_MISMATCH, f"this token belongs to organization "
                       f"{principal.org_id}, not {org_id}; send that id as ORG-ID "
                       "(--org-id, env EDGESYNC_ORG_ID)", "ORG-ID")
    return principal, org_id


async def resolve_access(request: Request, token: str | None, org_header: str | None,
                         project_id: uuid.UUID, permission: str) -> Access:
    principal, org_id = await resolve_principal(request, token, org_header)
    if not principal.can(project_id, READ):
        raise _not_found()
    async with pool_of(request).acquire() as conn:
        in_org = await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM edge_projects WHERE id = $1 AND org_id = $2)",
            project_id, org_id)
    if not in_org:
        raise _not_found()
    if not principal.can(project_id, permission):
        raise ApiError(403, ApiErrorCode.PERMISSION_DENIED,
                       f"this needs {permission} on the project")
    return Access(principal, org_id, project_id)


_Token = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
_Org = Annotated[str | None, Header(alias="ORG-ID",
                                    description="the organization the call acts in (UUID)")]
_ProjectId = Annotated[uuid.UUID, Path(description="project UUID")]


async def _can_read(request: Request, project_id: _ProjectId, token: _Token,
                    org: _Org = None) -> Access:
    return await resolve_access(request, token.credentials if token else None, org,
                                project_id, READ)


async def _can_manage(request: Request, project_id: _ProjectId, token: _Token,
                      org: _Org = None) -> Access:
    return await resolve_access(request, token.credentials if token else None, org,
                                project_id, MANAGE_DEVICES)


CanRead = Annotated[Access, Depends(_can_read)]
CanManage = Annotated[Access, Depends(_can_manage)]


async def _member(request: Request, token: _Token, org: _Org = None) -> Principal:
    principal, _ = await resolve_principal(request, token.credentials if token else None, org)
    return principal


# A caller of the organization, whatever project (the project list).
Member = Annotated[Principal, Depends(_member)]
