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

from edgesync.identity._bootstrap import bootstrap
from edgesync.identity._permissions import MANAGE_DEVICES, READ
from edgesync.operations import TokenCreated, create_token, revoke_token
from edgesync.store import Conn

__all__ = ["AdminResult", "Bootstrapped", "TokenRevoked", "admin_command"]

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
        return TokenRevoked(await revoke_token(conn, args.token_id))
    permissions = [READ] if args.permission == "read" else [READ, MANAGE_DEVICES]
    expires = (datetime.now(UTC) + timedelta(days=args.expires_in_days)
               if args.expires_in_days else None)
    created = await create_token(conn, org=args.org, principal=args.principal, kind=args.kind,
                                 projects=args.project, permissions=permissions,
                                 description=args.description, expires_at=expires)
    sys.stderr.write(_SHOWN_ONCE)
    return created
