"""``edgesync admin …``: bootstrap an install, issue and revoke API tokens. Each command
answers a frozen dataclass the CLI prints as JSON (orjson writes dataclasses field by
field, in declaration order)."""

from __future__ import annotations

import argparse
import shlex
import sys
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from edgesync.errors import NotFoundError
from edgesync.identity._bootstrap import bootstrap
from edgesync.identity._orgs import get_org_by_name
from edgesync.identity._permissions import MANAGE_DEVICES, READ, grant
from edgesync.identity._principals import ensure_principal
from edgesync.identity._tokens import issue_token, revoke_token
from edgesync.store import Conn

__all__ = ["AdminResult", "Bootstrapped", "ProjectGrant", "TokenCreated", "TokenRevoked",
           "admin_command"]

_SHOWN_ONCE = "edgesync: store this token now: it is shown only once\n"


@dataclass(frozen=True, slots=True)
class Bootstrapped:
    """``admin bootstrap``: the organization, project and admin, and its token (once)."""

    org_id: uuid.UUID
    project_id: uuid.UUID
    principal_id: uuid.UUID
    token_id: uuid.UUID
    token: str

    def as_env(self) -> str:
        """Shell lines that set what the operator commands read (``--format env``)."""
        return "".join(f"export {name}={shlex.quote(str(value))}\n" for name, value in (
            ("EDGESYNC_TOKEN", self.token), ("EDGESYNC_ORG_ID", self.org_id),
            ("EDGESYNC_PROJECT", self.project_id)))


@dataclass(frozen=True, slots=True)
class ProjectGrant:
    """The permissions a new token's principal holds on one project."""

    project_id: uuid.UUID
    name: str
    permissions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TokenCreated:
    """``admin token create``: the token (shown once) and what its principal may do."""

    org_id: uuid.UUID
    principal_id: uuid.UUID
    token_id: uuid.UUID
    token: str
    expires_at: datetime | None
    projects: tuple[ProjectGrant, ...]


@dataclass(frozen=True, slots=True)
class TokenRevoked:
    """``admin token revoke``."""

    token_id: uuid.UUID
    revoked: bool = True


AdminResult = Bootstrapped | TokenCreated | TokenRevoked


async def admin_command(conn: Conn, args: argparse.Namespace) -> AdminResult:
    if args.admin_command == "bootstrap":
        done = await bootstrap(conn, org=args.org, project=args.project,
                               topic_slug=args.topic_slug, admin=args.admin)
        sys.stderr.write(_SHOWN_ONCE)
        return Bootstrapped(done.org_id, done.project_id, done.principal_id, done.token.id,
                            done.token.token)
    if args.token_command == "revoke":
        revoked = await revoke_token(conn, args.token_id)
        if revoked is None:
            raise NotFoundError(f"token {args.token_id} not found")
        assert isinstance(revoked, uuid.UUID)
        return TokenRevoked(revoked)
    return await _create_token(conn, args)


async def _create_token(conn: Conn, args: argparse.Namespace) -> TokenCreated:
    permissions = [READ] if args.permission == "read" else [READ, MANAGE_DEVICES]
    expires = (datetime.now(UTC) + timedelta(days=args.expires_in_days)
               if args.expires_in_days else None)
    async with conn.transaction():
        org_id = await get_org_by_name(conn, args.org)
        principal_id = await ensure_principal(conn, org_id, args.principal, args.kind)
        projects = []
        for name in args.project:
            project_id = await conn.fetchval(
                "SELECT id FROM edge_projects WHERE name = $1 AND org_id = $2", name, org_id)
            if project_id is None:
                raise NotFoundError(f"project {name!r} not found in organization {args.org!r}")
            for permission in permissions:
                await grant(conn, principal_id, project_id, permission)
            projects.append(ProjectGrant(project_id, name, tuple(permissions)))
        issued = await issue_token(conn, principal_id, description=args.description,
                                   expires_at=expires)
    sys.stderr.write(_SHOWN_ONCE)
    return TokenCreated(org_id, principal_id, issued.id, issued.token, expires, tuple(projects))
