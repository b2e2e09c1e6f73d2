"""Helpers of the governance tests: devices, topics, reviews, telemetry payloads."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg
import orjson

from edgesync import _core, governance, registry
from edgesync.materialize import quote_ident
from edgesync.protocol import uuid7

T0 = datetime(2026, 4, 28, 9, 0, tzinfo=UTC)
TM_COLUMNS = [("ts", "TEXT", 0, True), ("value_c", "REAL", 0, False),
              ("sensor", "TEXT", 0, False)]


def rows_topic(scope: registry.DeviceScope) -> str:
    return f"{scope.root_topic}/sync/rows/batch"


def tm_topic(scope: registry.DeviceScope) -> str:
    return f"{scope.root_topic}/sync/telemetry/batch"


async def add_device(pool: asyncpg.Pool, unique: str, name: str, *,
                     fleet: str | None = None,
                     policy: dict[str, Any] | None = None) -> registry.DeviceScope:
    async with pool.acquire() as conn:
        scope = await registry.add_device(conn, project=f"gp-{unique}", name=f"{name}-{unique}",
                                          topic_slug=f"gs-{unique}", fleet=fleet)
        if policy is not None:
            await conn.execute("UPDATE edge_projects SET policy = policy || $2 WHERE id = $1",
                               scope.project_id, policy)
    return scope


async def queued_review(pool: asyncpg.Pool, lineage_id: uuid.UUID) -> dict[str, Any]:
    async with pool.acquire() as conn:
        (review,) = [r for r in await governance.list_reviews(conn, status="queued")
                     if r["lineage_id"] == lineage_id]
    return review


async def approve(pool: asyncpg.Pool, lineage_id: uuid.UUID,
                  actions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    review = await queued_review(pool, lineage_id)
    async with pool.acquire() as conn:
        claimed = await governance.claim_review(conn, review["id"], actor="t",
                                                action_version=review["action_version"])
        return await governance.approve_review(conn, review["id"], actor="t",
                                               action_version=claimed["action_version"],
                                               column_actions=actions)


async def target_rows(pool: asyncpg.Pool, lineage_id: uuid.UUID, columns: str
                      ) -> list[tuple[Any, ...]]:
    table = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                lineage_id)
    rows = await pool.fetch(f"SELECT {columns} FROM {quote_ident(table)} ORDER BY {columns}")
    return [tuple(r) for r in rows]




def rfc3339(t: datetime) -> str:
    return t.astimezone(UTC).isoformat().replace("+00:00", "Z")


class Telemetry:
    """Builds ``sync/telemetry/batch`` payloads the way the agent does."""

    def __init__(self, table: str = "temps") -> None:
        self.table = table
        self.seq = 0
        self.schema_hash, canonical = _core.schema_fingerprint(table, TM_COLUMNS)
        self.schema_columns = orjson.loads(canonical)

    def payload(self, *samples: tuple[datetime, float | None]) -> bytes:
        self.seq += 1
        rows = [{"ts": rfc3339(t), "row_id": str(uuid.uuid4()),
                 "fields": {"value_c": v, "sensor": "s1"}} for t, v in samples]
        stamps = [t for t, _ in samples]
        return orjson.dumps({
            "format_version": 1, "capture_strategy": "sqlite_telemetry_batch_v1",
            "batch_id": uuid7(), "batch_seq": self.seq, "source_table": self.table,
            "schema_hash": self.schema_hash, "schema_columns": self.schema_columns,
            "cursor_start_ts": rfc3339(min(stamps)), "cursor_end_ts": rfc3339(max(stamps)),
            "row_count": len(rows), "rows": rows,
        })
