"""``edgesync admin bootstrap|token create|token revoke``: identity administration on the
database directly. Each command answers a frozen dataclass the CLI prints as JSON (orjson
writes dataclasses field by field, in declaration order)."""

from __future__ import annotations

import shlex
import sys
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from edgesync.cli._options import server_db_options

if TYPE_CHECKING:
    import argparse

    from edgesync.operations import TokenCreated
    from edgesync.store import Conn

__all__ = ["Bootstrapped", "TokenRevoked", "add_admin_parser", "run_on_database"]

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


def add_admin_parser(sub: Any) -> None:
    admin = sub.add_parser("admin", help="bootstrap an install; issue and revoke API tokens",
                           description="Identity administration on the database directly.")
    asub = admin.add_subparsers(dest="admin_command", required=True, metavar="ACTION")
    boot = asub.add_parser(
        "bootstrap", help="create the first organization, project and admin token",
        description="Create (or reuse) an organization and a project in it, give the user "
                    "'admin' every permission on the project, and print a new API token for "
                    "it (shown once).")
    boot.add_argument("--org", required=True, help="organization name")
    boot.add_argument("--project", required=True, help="project name")
    boot.add_argument("--topic-slug", default="",
                      help="the project's topic slug (first MQTT topic level; default empty)")
    boot.add_argument("--admin", default="admin", help="name of the admin user (default admin)")
    boot.add_argument("--format", choices=["json", "env"], default="json",
                      help="json (default), or env: export lines of EDGESYNC_TOKEN, "
                           "EDGESYNC_ORG_ID and EDGESYNC_PROJECT for the operator commands "
                           "(eval \"$(edgesync admin bootstrap … --format env)\")")
    server_db_options(boot)

    token = asub.add_parser("token", help="issue or revoke API tokens",
                            description="Issue or revoke API tokens.")
    tsub = token.add_subparsers(dest="token_command", required=True, metavar="ACTION")
    create = tsub.add_parser(
        "create", help="issue a token for a user or service account (shown once)",
        description="Create the principal if new, grant it a permission on each --project, "
                    "and print a new token for it.")
    create.add_argument("--org", required=True, help="organization name")
    create.add_argument("--principal", required=True, help="user or service account name")
    create.add_argument("--kind", choices=["user", "service_account"], default="user")
    create.add_argument("--project", action="append", default=[],
                        help="project name to grant on (repeatable)")
    create.add_argument("--permission", choices=["read", "manage"], default="read",
                        help="read: PROJECT_CAN_READ; manage: PROJECT_CAN_MANAGE_DEVICES too")
    create.add_argument("--description", default=None)
    create.add_argument("--expires-in-days", type=int, default=None)
    server_db_options(create)
    revoke = tsub.add_parser("revoke", help="revoke a token by its id",
                             description="Revoke an API token; it stops working at once.")
    revoke.add_argument("token_id", type=uuid.UUID)
    server_db_options(revoke)


async def run_on_database(conn: Conn, args: argparse.Namespace
                          ) -> Bootstrapped | TokenCreated | TokenRevoked:
    from edgesync.identity import MANAGE_DEVICES, READ, bootstrap
    from edgesync.operations import create_token, revoke_token

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
