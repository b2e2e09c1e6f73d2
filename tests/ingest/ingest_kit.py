"""Fleets for the ingest tests: many devices of one project, their table's schema
approved once in the registry (project coalescing), so every device is approved on
arrival."""

from __future__ import annotations

from typing import Any

import asyncpg
from kits.review_helpers import approve_registry
from kits.telemetry_payloads import T0, Telemetry

import edgesync.fleet
from edgesync.ingest import IngestPipeline, Replayer

COLUMNS = [("id", "INTEGER", 1, True), ("mode", "TEXT", 0, True), ("setpoint", "REAL", 0, False)]


async def fleet(pool: asyncpg.Pool, batches: Any, unique: str, n: int, *,
                telemetry: bool = False
                ) -> tuple[list[edgesync.fleet.DeviceScope], list[Any], str]:
    """``n`` devices of one project with project coalescing, the table's schema approved
    once in the registry: every later device is approved on arrival."""
    async with pool.acquire() as conn:
        scopes = [await edgesync.fleet.add_device(conn,
                                                  project=f"gc-{unique}", name=f"d{i}-{unique}",
                                                  topic_slug=f"gc-{unique}") for i in range(n)]
        await conn.execute("UPDATE edge_projects SET policy = policy || $2 WHERE id = $1",
                           scopes[0].project_id, {"schema_coalescing_mode": "project"})
    factories: list[Any] = [batches("device_state", COLUMNS) for _ in scopes]
    pipe = IngestPipeline(pool)
    first = await pipe.handle(topic(scopes[0]), factories[0].payload(
        factories[0].rows(("insert", {"id": 0, "mode": "seed", "setpoint": 0.0}))))
    if telemetry:  # and the devices' telemetry table, approved the same way
        await pipe.handle(tm_topic(scopes[0]), Telemetry().samples((T0, 0.0)))
    await approve_registry(pool, scopes[0].project_id)
    await Replayer(pool).drain_pending(project_id=scopes[0].project_id)
    table = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                first.lineage_id)
    return scopes, factories, table


def topic(scope: edgesync.fleet.DeviceScope) -> str:
    return f"{scope.root_topic}/sync/rows/batch"


def tm_topic(scope: edgesync.fleet.DeviceScope) -> str:
    return f"{scope.root_topic}/sync/telemetry/batch"
