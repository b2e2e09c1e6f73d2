"""``Idempotency-Key`` for every mutation.

The key is stored per principal with a fingerprint of the request (method, path and
canonical JSON body) and the first response, in the same transaction as the
mutation's own writes: a retry finds the record and gets the stored response without
anything running twice, and a crash leaves neither. Concurrent requests with one key
are serialized by a transaction-scoped advisory lock. Reusing a key for a different
request is a 422.

A record is kept for ``RETENTION`` (24 hours, long enough for any client's retries).
After that the key is free again, and each mutation deletes a few expired records, so
the table stays the size of a day's mutations without a background job.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Annotated

import orjson
from fastapi import Header, Request, Response
from pydantic import BaseModel

from edgesync.api._auth import Access
from edgesync.api._errors import ApiError, describe
from edgesync.errors import ApiErrorCode, EdgesyncError
from edgesync.store import Conn

__all__ = ["RETENTION", "IdempotencyKey", "Work", "idempotent"]

RETENTION = timedelta(hours=24)
# Expired records removed per mutation: more than are written, so they never pile up.
_SWEEP = 100

IdempotencyKey = Annotated[
    str | None,
    Header(alias="Idempotency-Key", max_length=255,
           description="required on mutations: a retry with the same key returns the first "
                       "response and changes nothing again"),
]

Work = Callable[[Conn], Awaitable[tuple[int, BaseModel]]]
"""The mutation: runs in the idempotency transaction, returns (status, body)."""


async def _fingerprint(request: Request) -> bytes:
    body = await request.body()
    try:
        canonical = orjson.dumps(orjson.loads(body), option=orjson.OPT_SORT_KEYS) if body else b""
    except orjson.JSONDecodeError:
        canonical = body
    target = request.url.path + ("?" + request.url.query if request.url.query else "")
    return hashlib.sha256(b"\0".join([request.method.encode(), target.encode(),
                                      canonical])).digest()


def _response(status: int, content: bytes, *, replayed: bool) -> Response:
    headers = {"Idempotent-Replayed": "true"} if replayed else None
    return Response(content, status_code=status, media_type="application/json", headers=headers)


async def idempotent(conn: Conn, access: Access, request: Request, key: str | None,
                     work: Work, *, redact: Callable[[BaseModel], BaseModel] | None = None
                     ) -> Response:
    """Run ``work`` once per key. ``redact`` gives the body to store for replays when the
    first answer carries secrets shown once (a retry then gets it without them)."""
    if not key:
        raise ApiError(400, ApiErrorCode.IDEMPOTENCY_KEY_REQUIRED,
                       "mutations need an Idempotency-Key header", "Idempotency-Key")
    fingerprint = await _fingerprint(request)
    principal_id = access.principal.id
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                           f"edgesync-idempotency:{principal_id}:{key}")
        stored = await conn.fetchrow(
            "SELECT request_hash, status_code, response_body FROM edge_idempotency_keys "
            "WHERE principal_id = $1 AND idempotency_key = $2 "
            "AND created_at > now() - $3::interval",
            principal_id, key, RETENTION)
        if stored is not None:
            if bytes(stored["request_hash"]) != fingerprint:
                raise ApiError(422, ApiErrorCode.IDEMPOTENCY_KEY_REUSED,
                               "this Idempotency-Key was used for a different request",
                               "Idempotency-Key")
            return _response(stored["status_code"], bytes(stored["response_body"]),
                             replayed=True)
        try:
            async with conn.transaction():
                status, body = await work(conn)
        except (ApiError, EdgesyncError) as exc:
            status, body = describe(exc)
            if status >= 500:
                raise
        content = body.model_dump_json().encode()
        stored_content = (redact(body).model_dump_json().encode() if redact and status < 300
                          else content)
        # An expired record of this key is replaced.
        await conn.execute(
            "INSERT INTO edge_idempotency_keys (principal_id, idempotency_key, request_hash, "
            "method, path, status_code, response_body) VALUES ($1, $2, $3, $4, $5, $6, $7) "
            "ON CONFLICT (principal_id, idempotency_key) DO UPDATE SET "
            "request_hash = EXCLUDED.request_hash, method = EXCLUDED.method, "
            "path = EXCLUDED.path, status_code = EXCLUDED.status_code, "
            "response_body = EXCLUDED.response_body, created_at = now()",
            principal_id, key, fingerprint, request.method, request.url.path, status,
            stored_content)
        await conn.execute(
            "DELETE FROM edge_idempotency_keys WHERE ctid = ANY(ARRAY("
            "SELECT ctid FROM edge_idempotency_keys WHERE created_at <= now() - $1::interval "
            "ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED))", RETENTION, _SWEEP)
    return _response(status, content, replayed=False)
