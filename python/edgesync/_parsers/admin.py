"""Parser of ``edgesync admin …`` (bootstrap, API tokens); the commands are
``edgesync.identity._admin``."""

from __future__ import annotations

import uuid
from typing import Any

__all__ = ["add_admin_parser"]


def add_admin_parser(sub: Any, db_options: Any) -> None:
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
    db_options(boot)

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
    db_options(create)
    revoke = tsub.add_parser("revoke", help="revoke a token by its id",
                             description="Revoke an API token; it stops working at once.")
    revoke.add_argument("token_id", type=uuid.UUID)
    db_options(revoke)
