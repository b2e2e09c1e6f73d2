"""Tokens, organizations and permissions, below the HTTP layer."""

from __future__ import annotations

import asyncpg

from edgesync import identity


async def test_tokens_are_stored_hashed_and_shown_once(pool: asyncpg.Pool, unique: str) -> None:
    async with pool.acquire() as conn:
        boot = await identity.bootstrap(conn, org=f"o-{unique}", project=f"p-{unique}",
                                        topic_slug=f"s-{unique}")
        stored = await conn.fetchrow("SELECT * FROM edge_api_tokens WHERE id = $1",
                                     boot.token.id)
        principal = await identity.authenticate(conn, boot.token.token)
    assert stored is not None
    assert bytes(stored["token_hash"]) == identity.hash_token(boot.token.token)
    assert boot.token.token not in str(dict(stored))
    assert principal is not None and principal.org_id == boot.org_id
    assert principal.can(boot.project_id, identity.MANAGE_DEVICES)
    assert principal.can(boot.project_id, identity.READ)  # implied


async def test_unknown_revoked_and_expired_tokens_do_not_authenticate(
        pool: asyncpg.Pool, unique: str) -> None:
    async with pool.acquire() as conn:
        boot = await identity.bootstrap(conn, org=f"o-{unique}", project=f"p-{unique}",
                                        topic_slug=f"s-{unique}")
        assert await identity.authenticate(conn, "esk_not-a-token") is None
        expired = await identity.issue_token(conn, boot.principal_id)
        await conn.execute("UPDATE edge_api_tokens SET expires_at = now() - interval '1 s' "
                           "WHERE id = $1", expired.id)
        assert await identity.authenticate(conn, expired.token) is None
        await conn.execute("UPDATE edge_api_tokens SET revoked_at = now() WHERE id = $1",
                           boot.token.id)
        assert await identity.authenticate(conn, boot.token.token) is None


async def test_bootstrap_again_reuses_org_and_project(pool: asyncpg.Pool, unique: str) -> None:
    async with pool.acquire() as conn:
        first = await identity.bootstrap(conn, org=f"o-{unique}", project=f"p-{unique}",
                                         topic_slug=f"s-{unique}")
        second = await identity.bootstrap(conn, org=f"o-{unique}", project=f"p-{unique}",
                                          topic_slug=f"s-{unique}")
    assert (first.org_id, first.project_id, first.principal_id) == (
        second.org_id, second.project_id, second.principal_id)
    assert first.token.token != second.token.token
