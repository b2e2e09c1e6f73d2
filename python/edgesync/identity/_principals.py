"""Principals (users and service accounts) and turning a bearer token into one."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from edgesync.errors import ConflictError, InvalidRequestError
from edgesync.identity._permissions import implied
from edgesync.identity._tokens import hash_token, note_token_used
from edgesync.store import Conn

__all__ = ["KINDS", "Principal", "authenticate", "ensure_principal"]

KINDS = ("user", "service_account")


@dataclass(frozen=True, slots=True)
class Principal:
    id: uuid.UUID
    org_id: uuid.UUID
    kind: str
    name: str
    permissions: dict[uuid.UUID, frozenset[str]] = field(default_factory=dict)
    """Project id → what this principal may do there (implied permissions included)."""

    def can(self, project_id: uuid.UUID, permission: str) -> bool:
        return permission in self.permissions.get(project_id, frozenset())


async def ensure_principal(conn: Conn, org_id: uuid.UUID, name: str,
                           kind: str = "user") -> uuid.UUID:
    if kind not in KINDS:
        raise InvalidRequestError("kind", f"must be one of {', '.join(KINDS)}")
    if not name or len(name) > 200:
        raise InvalidRequestError("name", "principal name must be 1..200 characters")
    row = await conn.fetchrow(
        "INSERT INTO edge_principals (id, org_id, kind, name) VALUES ($1, $2, $3, $4) "
        "ON CONFLICT (org_id, name) DO UPDATE SET name = EXCLUDED.name RETURNING id, kind",
        uuid.uuid4(), org_id, kind, name)
    assert row is not None
    if row["kind"] != kind:
        raise ConflictError(f"principal {name!r} exists as a {row['kind']}, not a {kind}")
    return uuid.UUID(str(row["id"]))


async def authenticate(conn: Conn, token: str) -> Principal | None:
    """The principal of a live token (not revoked, not expired), or ``None``."""
    row = await conn.fetchrow(
        "SELECT t.id AS token_id, p.id, p.org_id, p.kind, p.name FROM edge_api_tokens t "
        "JOIN edge_principals p ON p.id = t.principal_id WHERE t.token_hash = $1 "
        "AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())",
        hash_token(token))
    if row is None:
        return None
    await note_token_used(conn, row["token_id"])
    grants: dict[uuid.UUID, set[str]] = {}
    for g in await conn.fetch(
            "SELECT project_id, permission FROM edge_project_permissions WHERE principal_id = $1",
            row["id"]):
        grants.setdefault(g["project_id"], set()).add(g["permission"])
    return Principal(row["id"], row["org_id"], row["kind"], row["name"],
                     {p: frozenset(implied(s)) for p, s in grants.items()})
