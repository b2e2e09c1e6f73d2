"""Helpers of the control-channel end-to-end tests (tests/e2e) on top of ``e2e_kit``:
the agent's journal and its own state.db as the device sees them, and the cloud's
outbox of pending controls."""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import asyncpg
from kits.e2e_kit import Device

# ------------------------------------------------------------------ the device's side

def journal_count(db: Path, table: str | None = None) -> int:
    with contextlib.closing(sqlite3.connect(db, timeout=10)) as conn:
        if table is None:
            n = conn.execute("SELECT count(*) FROM __edgesync_journal").fetchone()[0]
        else:
            n = conn.execute("SELECT count(*) FROM __edgesync_journal WHERE table_name = ?",
                             (table,)).fetchone()[0]
    return int(n)


async def journal_drained(db: Path) -> bool:
    """Every journaled change was confirmed (the journal's top row always stays)."""
    return journal_count(db) <= 1


def agent_table_state(state_db: Path, table: str) -> dict[str, Any] | None:
    """The agent's own record of a table in state.db (paused, watermark, cursor)."""
    if not state_db.exists():
        return None
    with contextlib.closing(sqlite3.connect(state_db, timeout=10)) as conn:
        conn.row_factory = sqlite3.Row
        row = conn.execute("SELECT * FROM tables WHERE source_table = ?", (table,)).fetchone()
    return dict(row) if row is not None else None


def agent_meta_int(state_db: Path, key: str) -> int:
    with contextlib.closing(sqlite3.connect(state_db, timeout=10)) as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return int(row[0]) if row is not None else 0


def agent_knows_control(state_db: Path, control_id: str) -> bool:
    with contextlib.closing(sqlite3.connect(state_db, timeout=10)) as conn:
        return conn.execute("SELECT 1 FROM controls WHERE control_id = ?",
                            (control_id,)).fetchone() is not None


async def device_paused(state_db: Path, table: str) -> bool:
    st = agent_table_state(state_db, table)
    return st is not None and bool(st["paused"])


async def device_resumed(state_db: Path, table: str) -> bool:
    st = agent_table_state(state_db, table)
    return st is not None and not st["paused"]


# ------------------------------------------------------------------ the cloud's outbox

async def pending_controls(pool: asyncpg.Pool, device: Device, kind: str
                           ) -> list[asyncpg.Record]:
    return list(await pool.fetch(
        "SELECT id, status, body, attempts FROM edge_pending_controls WHERE device_id = $1 "
        "AND control_kind = $2 ORDER BY created_at", device.id, kind))


async def control_status(pool: asyncpg.Pool, control_id: uuid.UUID, status: str) -> bool:
    return bool(await pool.fetchval(
        "SELECT status = $2 FROM edge_pending_controls WHERE id = $1", control_id, status))
