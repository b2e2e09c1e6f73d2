"""``edgesync admin …``: bootstrap an install, issue and revoke API tokens."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from edgesync.errors import NotFoundError
from edgesync.identity._bootstrap import bootstrap
from edgesync.identity._orgs import get_org_by_name
from edgesync.identity._permissions import MANAGE_DEVICES, READ, grant
from edgesync.identity._principals import ensure_principal
from edgesync.identity._tokens import issue_token, revoke_token
from edgesync.store import Conn

__all__ = ["admin_command"]

_SHOWN_ONCE = "edgesync: store this token now: it is shown only once\n"


async def admin_command(conn: Conn, args: argparse.Namespace) -> dict[str, Any]:
    if args.admin_command == "bootstrap":
        done = await bootstrap(conn, org=args.org, project=args.project,
                               topic_slug=args.topic_slug, admin=args.admin)
        sys.stderr.write(_SHOWN_ONCE)
        return {"org_id": done.org_id, "project_id": done.project_id,
                "principal_id": done.principal_id, "token_id": done.token.id,
                "token": done.token.token}
    if args.token_command == "revoke":
        revoked = await revoke_token(conn, args.token_id)
        if revoked is None:
            raise NotFoundError(f"token {args.token_id} not found")
        return {"token_id": revoked, "revoked": True}
    return await _create_token(conn, args)


async def _create_token(conn: Conn, args: argparse.Namespace) -> dict[str, Any]:
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
            projects.append({"project_id": project_id, "name": name,
                             "permissions": permissions})
        issued = await issue_token(conn, principal_id, description=args.description,
                                   expires_at=expires)
    sys.stderr.write(_SHOWN_ONCE)
    return {"org_id": org_id, "principal_id": principal_id, "token_id": issued.id,
            "token": issued.token, "expires_at": expires, "projects": projects}
