"""What ``--confirm-after-replica`` and failover rest on, without a standby: a multi-host
URL passes the URL check as given, a role that cannot read ``replay_lsn`` is refused at
start, and with no standby streaming a confirmation waits (by design) rather than go out.
The failover itself is tests/failover (a primary and standby of its own)."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from edgesync.errors import ConfigError
from edgesync.store import ReplicaGate, check_database_url, check_replica_visibility

MULTI = "postgresql://u:p@pg-a:5432,pg-b:5433/db?target_session_attrs=read-write"


def test_a_multi_host_url_passes_unchanged() -> None:
    assert check_database_url(MULTI) == MULTI


def test_a_bad_port_on_any_host_is_refused() -> None:
    with pytest.raises(ConfigError, match="not a PostgreSQL URL"):
        check_database_url("postgresql://pg-a:5432,pg-b:xx/db", "--database-url")


async def test_a_role_without_pg_monitor_is_refused(pool: asyncpg.Pool) -> None:
    role = f"edgesync_test_{uuid.uuid4().hex[:8]}"
    async with pool.acquire() as conn:
        await check_replica_visibility(conn)  # the suite's superuser
        await conn.execute(f'CREATE ROLE "{role}"')
        try:
            await conn.execute(f'SET ROLE "{role}"')
            with pytest.raises(ConfigError, match="pg_monitor"):
                await check_replica_visibility(conn)
            await conn.execute("RESET ROLE")
            await conn.execute(f'GRANT pg_monitor TO "{role}"')
            await conn.execute(f'SET ROLE "{role}"')
            await check_replica_visibility(conn)
        finally:
            await conn.execute("RESET ROLE")
            await conn.execute(f'DROP ROLE "{role}"')


async def test_with_no_standby_confirmations_are_held(pool: asyncpg.Pool,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    gate = ReplicaGate(within=0.2)
    async with pool.acquire() as conn:
        if await conn.fetchval("SELECT count(*) FROM pg_stat_replication"):
            pytest.skip("the suite's server has a standby")
        assert not await gate.passed(conn)
        assert not await gate.passed(conn)
    held = [r.getMessage() for r in caplog.records if "confirmations held" in r.getMessage()]
    assert len(held) == 1, held  # once, not every round
