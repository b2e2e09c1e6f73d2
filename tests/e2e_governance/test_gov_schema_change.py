"""The application changes its schema while the agent and the worker run.

* ``ALTER TABLE … ADD COLUMN`` (nullable): the new hash is ``compatible_additive``.
  With ``allow_additive_continue`` false a second review holds the lineage (rows
  stage) until it is approved; with true the lineage goes on without a review.
* A column's type changed by rebuilding the table (create new, copy, drop, rename):
  ``breaking``, a review; mirroring it onto the old column of another type is refused,
  mirroring it under a new column name works.

After each approval the cloud matches SQLite row for row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg
import pytest
from kits.e2e_kit import (
    Device,
    actions,
    app,
    cloud,
    eventually,
    lineage,
    pool_of,
    register,
    reviews,
    sqlite_rows,
    state_rows,
    target_of,
    wait_lineage,
    wait_reviews,
    wait_rows,
)
from kits.review_helpers import claim_and_approve

from edgesync import errors, governance
from edgesync.agent import Agent, load_config

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def gauges(lo: int, hi: int) -> tuple[str, list[tuple[Any, ...]]]:
    return ("INSERT INTO gauges (id, name, level, note) VALUES (?, ?, ?, ?)",
            [(i, f"g{i}", i * 3, None if i % 3 else f"note {i}") for i in range(lo, hi)])


@pytest.mark.parametrize("additive_continue", [False, True], ids=["review", "continue"])
async def test_schema_change_while_running(additive_continue: bool, tmp_path: Path,
                                           database_url: str, mqtt_url: str,
                                           unique: str) -> None:
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag="drift",
                             policy={"allow_additive_continue": additive_continue})
        app(dev.db, "CREATE TABLE gauges (id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                    "level INTEGER, note TEXT)")
        async with Agent(load_config(dev.config)) as agent:
            await _run(pool, dev, agent, additive_continue)


async def _run(pool: asyncpg.Pool, dev: Device, agent: Agent, additive_continue: bool) -> None:
    db = dev.db
    # ---- version 1: first schema, approved, live
    app(db, gauges(1, 101))
    await agent.flush()
    first = (await wait_reviews(pool, dev, {"gauges"}))["gauges"]
    await claim_and_approve(pool, first, None)
    table = await target_of(pool, dev, "gauges")

    def cloud_of(*cols: str) -> Any:
        async def fetch() -> list[tuple[Any, ...]]:
            return await state_rows(pool, table, dev, list(cols), "id")
        return fetch

    v1 = ("id", "name", "level", "note")
    await wait_rows(cloud_of(*v1), sqlite_rows(db, "SELECT * FROM gauges ORDER BY id"), "v1")
    v1_hash = (await lineage(pool, dev, "gauges"))["approved_schema_hash"]  # type: ignore[index]

    # ---- version 2: a nullable column added while running
    app(db, "ALTER TABLE gauges ADD COLUMN unit TEXT",
        "UPDATE gauges SET unit = 'bar', level = level + 1 WHERE id % 4 = 0",
        "DELETE FROM gauges WHERE id % 10 = 0")
    app(db, ("INSERT INTO gauges VALUES (?, ?, ?, ?, ?)",
             [(i, f"g{i}", i, None, "psi" if i % 2 else None) for i in range(101, 131)]))
    await agent.flush()
    v2 = (*v1, "unit")
    expected_v2 = sqlite_rows(db, "SELECT id, name, level, note, unit FROM gauges ORDER BY id")

    async def v2_version() -> asyncpg.Record | None:
        return await pool.fetchrow(
            "SELECT v.* FROM edge_schema_versions v JOIN edge_table_lineages l "
            "ON l.id = v.lineage_id WHERE l.device_id = $1 AND v.schema_hash <> $2",
            dev.id, v1_hash)

    version = await eventually(v2_version, what="the added column's schema version")
    assert version["classification"] == "compatible_additive"
    assert version["diff"]["added"] == ["unit"]
    assert not any(version["diff"][k] for k in ("dropped", "type_changed", "pk_changed"))
    if additive_continue:
        await wait_rows(cloud_of(*v2), expected_v2, "v2 continues without review")
        assert "gauges" not in await reviews(pool, dev, status="queued")
        rec = await lineage(pool, dev, "gauges")
        assert rec is not None and rec["status"] == "active" and rec["staged_rows"] == 0
    else:
        second = (await wait_reviews(pool, dev, {"gauges"}))["gauges"]
        assert second.classification == "compatible_additive"
        assert second.id != first.id
        rec = await wait_lineage(pool, dev, "gauges", lambda r: r["staged_rows"] > 0,
                                 "v2 rows staged under review")
        assert (rec["status"], rec["pause_reason"]) == ("paused", "schema_review")
        assert await cloud_of(*v1)() != sqlite_rows(
            db, "SELECT id, name, level, note FROM gauges ORDER BY id"), "v2 was held back"
        await claim_and_approve(pool, second, None)
        await wait_rows(cloud_of(*v2), expected_v2, "v2 after its review")
    rec = await wait_lineage(pool, dev, "gauges", lambda r: r["staged_rows"] == 0,
                             "v2 staging drained")
    assert rec["status"] == "active"
    v2_hash = rec["approved_schema_hash"]
    assert v2_hash == version["schema_hash"]

    # ---- version 3: level's type changed by rebuilding the table
    app(db, "CREATE TABLE gauges_new (id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
            "level TEXT, note TEXT, unit TEXT)",
        "INSERT INTO gauges_new SELECT id, name, 'L' || level, note, unit FROM gauges",
        "DROP TABLE gauges",
        "ALTER TABLE gauges_new RENAME TO gauges")
    app(db, "UPDATE gauges SET level = 'high' WHERE id = 5",
        "INSERT INTO gauges VALUES (500, 'after', 'low', NULL, 'm')")
    await agent.flush()
    third = await eventually(lambda: _open_review(pool, dev, {first.id}),
                             what="review of the type change")
    assert third.classification == "breaking"
    assert third.diff["type_changed"] == ["level"]
    rec = await wait_lineage(pool, dev, "gauges", lambda r: r["staged_rows"] > 0,
                             "v3 rows staged under review")
    assert (rec["status"], rec["pause_reason"]) == ("paused", "schema_review")

    # Mirroring the TEXT column onto the bigint "level" is refused, nothing changes.
    with pytest.raises(errors.ConflictError, match="level"):
        await claim_and_approve(pool, third, None)
    async with pool.acquire() as conn:
        claimed = await governance.get_review(conn, third.id)
        assert claimed.status == "in_review"
        await governance.approve_review(
            conn, third.id, actor="op", action_version=claimed.action_version,
            column_actions=actions(id="mirror", name="mirror", level=("mirror", "level_text"),
                                   note="mirror", unit="mirror"))
    v3 = ("id", "name", "level_text", "note", "unit")
    await wait_rows(cloud_of(*v3), sqlite_rows(db, "SELECT * FROM gauges ORDER BY id"),
                     "v3 after its review")
    rec = await wait_lineage(pool, dev, "gauges", lambda r: r["staged_rows"] == 0,
                             "v3 staging drained")
    assert rec["status"] == "active" and rec["materialization_errors"] == 0

    # ---- live on version 3
    app(db, "UPDATE gauges SET level = 'mid', unit = NULL WHERE id % 7 = 0",
        "DELETE FROM gauges WHERE id BETWEEN 40 AND 60",
        "INSERT INTO gauges VALUES (501, 'later', '1', 'x', 'y')")
    await agent.flush()
    await wait_rows(cloud_of(*v3), sqlite_rows(db, "SELECT * FROM gauges ORDER BY id"),
                     "v3 live")
    rec = await lineage(pool, dev, "gauges")
    assert rec is not None and rec["rejected_batches"] == 0


async def _open_review(pool: asyncpg.Pool, dev: Device, not_ids: set[Any]
                       ) -> governance.Review | None:
    for status in ("queued",):
        found = (await reviews(pool, dev, status=status)).get("gauges")
        if found is not None and found.id not in not_ids:
            return found
    return None
