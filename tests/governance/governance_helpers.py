"""Helpers of the governance tests: devices, topics, reviews."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

import edgesync.fleet
from edgesync.materialize import quote_ident


def rows_topic(scope: edgesync.fleet.DeviceScope) -> str:
    return f"{scope.root_topic}/sync/rows/batch"


def tm_topic(scope: edgesync.fleet.DeviceScope) -> str:
    return f"{scope.root_topic}/sync/telemetry/batch"


async def add_device(pool: asyncpg.Pool, unique: str, name: str, *,
                     fleet: str | None = None,
                     policy: dict[str, Any] | None = None) -> edgesync.fleet.DeviceScope:
    async with pool.acquire() as conn:
        scope = await edgesync.fleet.add_device(conn,
                                                project=f"gp-{unique}", name=f"{name}-{unique}",
                                                topic_slug=f"gs-{unique}", fleet=fleet)
        if policy is not None:
            await conn.execute("UPDATE edge_projects SET policy = policy || $2 WHERE id = $1",
                               scope.project_id, policy)
    return scope


async def target_rows(pool: asyncpg.Pool, lineage_id: uuid.UUID, columns: str
                      ) -> list[tuple[Any, ...]]:
    table = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                lineage_id)
    rows = await pool.fetch(f"SELECT {columns} FROM {quote_ident(table)} ORDER BY {columns}")
    return [tuple(r) for r in rows]


