"""API tokens: 32 random bytes, shown once; only their SHA-256 is stored."""

from __future__ import annotations

import base64
import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime

from edgesync.store import Conn

__all__ = ["TOKEN_PREFIX", "IssuedToken", "hash_token", "issue_token", "note_token_used",
           "revoke_token"]

TOKEN_PREFIX = "esk_"


@dataclass(frozen=True, slots=True)
class IssuedToken:
    id: uuid.UUID
    principal_id: uuid.UUID
    token: str
    """The secret itself: print it once, it cannot be recovered later."""


def hash_token(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def _new_token() -> str:
    raw = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode("ascii")
    return TOKEN_PREFIX + raw


async def issue_token(conn: Conn, principal_id: uuid.UUID, *, description: str | None = None,
                      expires_at: datetime | None = None) -> IssuedToken:
    token = _new_token()
    token_id = uuid.uuid4()
    await conn.execute(
        "INSERT INTO edge_api_tokens (id, principal_id, token_hash, token_prefix, description, "
        "expires_at) VALUES ($1, $2, $3, $4, $5, $6)",
        token_id, principal_id, hash_token(token), token[: len(TOKEN_PREFIX) + 6], description,
        expires_at)
    return IssuedToken(token_id, principal_id, token)


async def revoke_token(conn: Conn, token_id: uuid.UUID) -> object:
    """Revoke the token (again: a no-op); its id, or None when there is no such token."""
    return await conn.fetchval(
        "UPDATE edge_api_tokens SET revoked_at = coalesce(revoked_at, now()) "
        "WHERE id = $1 RETURNING id", token_id)


async def note_token_used(conn: Conn, token_id: uuid.UUID) -> None:
    """Recorded at most once a minute, so reads do not each write a row."""
    await conn.execute(
        "UPDATE edge_api_tokens SET last_used_at = now() WHERE id = $1 "
        "AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')", token_id)
