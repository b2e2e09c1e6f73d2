"""First schema of three tables on one device — an append-only event table, a state
table with updates and deletes, a telemetry table — through real Mosquitto and
PostgreSQL: reviews queued, rows staged and readable, approval with mixed column
actions (mirror under another name, ignore, defer), replay, live changes. A deferred
column keeps its lineage paused, with every row still staged, until a second
approval decides it; then the cloud matches SQLite row for row."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
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
    sqlite_rows,
    state_rows,
    target_of,
    ts_rows,
    utc,
    wait_lineage,
    wait_reviews,
    wait_rows,
)
from kits.review_helpers import claim_and_approve

from edgesync import governance, staging
from edgesync.agent import Agent, load_config
from edgesync.materialize import quote_ident

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

SCHEMA = (
    "CREATE TABLE events (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, body TEXT, at TEXT)",
    "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT, level INTEGER, ratio REAL, "
    "blob BLOB)",
    "CREATE TABLE readings (id INTEGER PRIMARY KEY, ts TEXT NOT NULL, temp REAL, hum REAL, "
    "note TEXT)",
    "CREATE INDEX readings_ts ON readings (ts)",
)
T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)


def stamp(i: int) -> str:
    return (T0 + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def events_sql(lo: int, hi: int) -> tuple[str, list[tuple[Any, ...]]]:
    return ("INSERT INTO events VALUES (?, ?, ?, ?)",
            [(i, f"kind-{i % 5}", None if i % 7 == 0 else f"body «{i}» 'q'", stamp(i))
             for i in range(lo, hi)])


def readings_sql(lo: int, hi: int) -> tuple[str, list[tuple[Any, ...]]]:
    return ("INSERT INTO readings VALUES (?, ?, ?, ?, ?)",
            [(i, stamp(i), 20 + i / 8, None if i % 11 == 0 else 0.1 * i, f"n{i}")
             for i in range(lo, hi)])


def expected_events(db: Path) -> list[tuple[Any, ...]]:
    return sqlite_rows(db, "SELECT id, kind, body FROM events ORDER BY id")


def expected_settings(db: Path, *, with_ratio: bool) -> list[tuple[Any, ...]]:
    ratio = ", ratio" if with_ratio else ""
    return sqlite_rows(db, f"SELECT key, value, level{ratio}, blob FROM settings ORDER BY key")


def expected_readings(db: Path) -> list[tuple[Any, ...]]:
    return [(utc(ts), i, temp, hum) for ts, i, temp, hum in
            sqlite_rows(db, "SELECT ts, id, temp, hum FROM readings ORDER BY ts")]


def staged_state(staged: list[dict[str, Any]]) -> dict[Any, dict[str, Any] | None]:
    """Fold staged row operations (newest commit_seq wins) into the state they imply."""
    state: dict[Any, tuple[int, dict[str, Any] | None]] = {}
    for op in staged:
        key = op["pk"]["key"]
        if key not in state or state[key][0] < op["commit_seq"]:
            state[key] = (op["commit_seq"], None if op["op"] == "delete" else op["row"])
    return {k: v for k, (_, v) in state.items() if v is not None}


def blob_hex(value: bytes | None) -> dict[str, str] | None:
    return None if value is None else {"$blob": value.hex().upper()}


async def staged_of(pool: asyncpg.Pool, lineage_id: uuid.UUID) -> list[dict[str, Any]]:
    """Each staged row's document with its staging_reason next to it."""
    async with pool.acquire() as conn:
        staged = await staging.list_staged_rows(conn, lineage_id, limit=100_000)
    return [{"staging_reason": r.staging_reason, **r.doc} for r in staged]


async def test_first_schema_mixed_actions_defer_replay_live(
        tmp_path: Path, database_url: str, mqtt_url: str, unique: str) -> None:
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag="first",
                             telemetry={"readings": "ts"})
        app(dev.db, *SCHEMA)
        async with Agent(load_config(dev.config)) as agent:
            await _run(pool, dev, agent)


async def _run(pool: asyncpg.Pool, dev: Device, agent: Agent) -> None:
    db = dev.db
    # ---- the application writes; nothing of it is approved yet
    app(db, events_sql(1, 301), readings_sql(1, 201),
        ("INSERT INTO settings VALUES (?, ?, ?, ?, ?)",
         [(f"k{i:03}", f"v{i}", i, i / 4, bytes([i % 256, 0, 255]) if i % 4 else None)
          for i in range(1, 61)]))
    app(db, "UPDATE settings SET value = value || '!', level = level * 10 WHERE level % 3 = 0",
        "DELETE FROM settings WHERE level % 5 = 0",
        "UPDATE settings SET key = 'renamed' WHERE key = 'k001'")
    await agent.flush()

    queued = await wait_reviews(pool, dev, {"events", "settings", "readings"})
    for table, review in queued.items():
        assert review.classification == "ambiguous", table
        rec = await lineage(pool, dev, table)
        assert rec is not None
        assert (rec["status"], rec["pause_reason"]) == ("paused", "schema_review")
        assert rec["target_table"] is None
    ids = {t: r.lineage_id for t, r in queued.items()}

    # ---- staged rows are visible, decoded, and are exactly what SQLite holds
    async def staged_events() -> list[dict[str, Any]] | None:
        got = await staged_of(pool, ids["events"])
        return got if len(got) == 300 else None

    ev = await eventually(staged_events, what="300 staged event rows")
    assert {r["staging_reason"] for r in ev} == {"schema_review"}
    assert sorted((r["row"]["id"], r["row"]["kind"], r["row"]["body"]) for r in ev) \
        == expected_events(db)

    settings_now = {k: (v, lvl, ratio, blob_hex(b)) for k, v, lvl, ratio, b in
                    sqlite_rows(db, "SELECT key, value, level, ratio, blob FROM settings")}

    async def staged_settings() -> bool:
        folded = staged_state(await staged_of(pool, ids["settings"]))
        return {k: (r["value"], r["level"], r["ratio"], r["blob"])
                for k, r in folded.items()} == settings_now

    await eventually(staged_settings, what="staged settings fold into the SQLite state")

    async def staged_readings() -> list[dict[str, Any]] | None:
        got = await staged_of(pool, ids["readings"])
        return got if len(got) == 200 else None

    rd = await eventually(staged_readings, what="200 staged telemetry rows")
    assert sorted((utc(r["ts"]), r["fields"]["id"], r["fields"]["temp"], r["fields"]["hum"])
                  for r in rd) == expected_readings(db)

    # ---- approve with mixed actions
    await claim_and_approve(pool, queued["events"], actions(
        id="mirror", kind=("mirror", "event_kind"), body="mirror", at="ignore"))
    await claim_and_approve(pool, queued["readings"], actions(
        ts="ignore", id=("mirror", "reading_id"), temp=("mirror", "temperature_c"),
        hum="mirror", note="ignore"))
    await claim_and_approve(pool, queued["settings"], actions(
        key="mirror", value="mirror", level="mirror", ratio="defer", blob="mirror"))

    ev_table = await target_of(pool, dev, "events")
    rd_table = await target_of(pool, dev, "readings")
    st_table = await target_of(pool, dev, "settings")
    assert ev_table.startswith("edge_state_") and rd_table.startswith("edge_ts_")

    async def cloud_events() -> list[tuple[Any, ...]]:
        return await state_rows(pool, ev_table, dev, ["id", "event_kind", "body"], "id")

    async def cloud_readings() -> list[tuple[Any, ...]]:
        return await ts_rows(pool, rd_table, dev, ["reading_id", "temperature_c", "hum"])

    async def cloud_settings() -> list[tuple[Any, ...]]:
        return await state_rows(pool, st_table, dev, ["key", "value", "level", "ratio", "blob"],
                                "key")

    await wait_rows(cloud_events, expected_events(db), "events replayed")
    await wait_rows(cloud_readings, expected_readings(db), "readings replayed")
    for table in ("events", "readings"):
        rec = await wait_lineage(pool, dev, table, lambda r: r["staged_rows"] == 0,
                                 "staging drained")
        assert rec["status"] == "active", table
    # Ignored columns never reach the cloud.
    cols = {r["attname"] for r in await pool.fetch(
        "SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0",
        ev_table)}
    assert "event_kind" in cols and "kind" not in cols and "at" not in cols

    # ---- the deferred column keeps settings paused, its rows staged
    await wait_lineage(pool, dev, "settings",
                       lambda r: (r["status"], r["pause_reason"]) == ("paused", "deferred_columns"),
                       "settings stays paused for its deferred column")
    await eventually(lambda: _replay_settled(pool, ids["settings"]), what="settings replay")
    rec = await lineage(pool, dev, "settings")
    assert rec is not None and rec["staged_rows"] > 0, "deferred rows must stay staged"
    assert await _count(pool, st_table) == 0

    # ---- live changes
    app(db, events_sql(301, 401), readings_sql(201, 301),
        "UPDATE settings SET ratio = ratio + 100, value = 'live' WHERE level % 2 = 0",
        "DELETE FROM settings WHERE key IN ('k002', 'k007')",
        "INSERT INTO settings VALUES ('new', 'fresh', 7, 0.5, x'00')",
        "UPDATE settings SET key = 'k001' WHERE key = 'renamed'")
    await agent.flush()
    await wait_rows(cloud_events, expected_events(db), "live events")
    await wait_rows(cloud_readings, expected_readings(db), "live readings")
    await eventually(staged_settings_all(pool, ids["settings"], db), what="live settings staged")
    assert await _count(pool, st_table) == 0

    # ---- the second approval decides the deferred column: replay, active, all equal
    async with pool.acquire() as conn:
        review = await governance.reopen_review(conn, ids["settings"], actor="op")
    assert review.status == "queued"
    await claim_and_approve(pool, review, None)
    await wait_rows(cloud_settings, expected_settings(db, with_ratio=True), "settings replayed")
    rec = await wait_lineage(pool, dev, "settings", lambda r: r["status"] == "active",
                             "settings active")
    assert rec["staged_rows"] == 0 and rec["materialization_errors"] == 0

    app(db, "UPDATE settings SET level = -1 WHERE key = 'new'",
        "DELETE FROM settings WHERE key = 'k003'", events_sql(401, 420))
    await agent.flush()
    await wait_rows(cloud_settings, expected_settings(db, with_ratio=True), "live settings")
    await wait_rows(cloud_events, expected_events(db), "events at the end")
    for table in ("events", "settings", "readings"):
        rec = await lineage(pool, dev, table)
        assert rec is not None
        assert (rec["status"], rec["staged_rows"], rec["materialization_errors"],
                rec["rejected_batches"]) == ("active", 0, 0, 0), table


async def _count(pool: asyncpg.Pool, table: str) -> int:
    return int(await pool.fetchval(f"SELECT count(*) FROM {quote_ident(table)}"))


async def _replay_settled(pool: asyncpg.Pool, lineage_id: uuid.UUID) -> bool:
    pending = await pool.fetchval(
        "SELECT count(*) FROM edge_replay_intents WHERE lineage_id = $1 AND status = 'pending'",
        lineage_id)
    return bool(pending == 0)


def staged_settings_all(pool: asyncpg.Pool, lineage_id: uuid.UUID, db: Path) -> Any:
    want = {k: (v, lvl, ratio, blob_hex(b)) for k, v, lvl, ratio, b in
            sqlite_rows(db, "SELECT key, value, level, ratio, blob FROM settings")}

    async def probe() -> bool:
        folded = staged_state(await staged_of(pool, lineage_id))
        return {k: (r["value"], r["level"], r["ratio"], r["blob"])
                for k, r in folded.items()} == want

    return probe
