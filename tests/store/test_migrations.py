from __future__ import annotations

import asyncpg
import pytest

from edgesync.errors import SchemaTooNewError
from edgesync.store import KNOWN_VERSION, applied_version, migrate


async def test_migrations_are_applied_once(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        assert await applied_version(conn) == KNOWN_VERSION
        assert await migrate(conn) == 0
        tables = {r["tablename"] for r in await conn.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert {"edge_projects", "edge_fleets", "edge_devices", "edge_table_lineages",
            "edge_export_segments", "edge_schema_versions", "edge_schema_reviews",
            "edge_column_bindings", "edge_replay_intents", "edge_pending_controls",
            "edge_staged_rows"} <= tables


async def test_a_newer_database_is_refused(database_url: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        async with conn.transaction():
            await conn.execute(
                "INSERT INTO edge_schema_migrations (version, name) VALUES ($1, 'future')",
                KNOWN_VERSION + 1)
            with pytest.raises(SchemaTooNewError, match="upgrade edgesync"):
                await migrate(conn)
            raise _Rollback
    except _Rollback:
        pass
    finally:
        await conn.close()


class _Rollback(Exception):
    pass
