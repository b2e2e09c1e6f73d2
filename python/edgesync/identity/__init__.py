"""Who may do what: organizations, principals, API tokens, per-project permissions."""

from edgesync.identity._bootstrap import Bootstrap, bootstrap
from edgesync.identity._orgs import attach_project, ensure_org, get_org_by_name
from edgesync.identity._permissions import (
    MANAGE_DEVICES,
    PERMISSIONS,
    READ,
    grant,
)
from edgesync.identity._principals import Principal, authenticate, ensure_principal
from edgesync.identity._tokens import IssuedToken, hash_token, issue_token

__all__ = [
    "MANAGE_DEVICES",
    "PERMISSIONS",
    "READ",
    "Bootstrap",
    "IssuedToken",
    "Principal",
    "attach_project",
    "authenticate",
    "bootstrap",
    "ensure_org",
    "ensure_principal",
    "get_org_by_name",
    "grant",
    "hash_token",
    "issue_token",
]
