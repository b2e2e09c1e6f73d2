"""DDL on shared targets: one lock per target table, and a check that sees committed DDL.

Several transactions may need the same object at once: a telemetry day partition (live
ingest in either lane, a replay, a re-snapshot, another worker), a target table or its
new columns (two approvals of a coalesced target, an approval beside live ingest), the
cloud-authority columns. Every path that creates or alters anything of a target table
first takes ``lock_ddl(table)`` — one transaction-scoped advisory lock per table, the
same key whoever asks — and then checks what exists with ``relations``/``table_columns``.

The check must be a query of the catalog *tables* (``pg_class``, ``pg_attribute``):
each statement of a READ COMMITTED transaction reads them with a fresh snapshot, so it
sees what the lock's previous holder committed. ``to_regclass`` does not: it looks the
name up in the backend's system cache, where an earlier miss in the same transaction is
remembered as a negative entry, and taking an advisory lock processes no cache
invalidations. The loser of a race then saw "no such partition" after the winner had
committed it, and its CREATE TABLE failed with "already exists" (issue 25).

Staging tables (``CREATE TEMP TABLE``) are per connection: no two transactions can
race on them, so they take no lock.
"""

from __future__ import annotations

import hashlib

from edgesync.store import Conn

__all__ = ["ddl_lock_key", "lock_ddl", "relations", "table_columns"]


def ddl_lock_key(table: str) -> int:
    """The advisory lock key of ``table``'s DDL (signed 64 bits, as PostgreSQL takes).
    The ``edge_ts:`` prefix is the one partitions were locked with before every path
    shared the lock: workers of both versions still exclude each other during an
    upgrade."""
    return int.from_bytes(hashlib.sha256(f"edge_ts:{table}".encode()).digest()[:8], "big",
                          signed=True)


async def lock_ddl(conn: Conn, table: str) -> None:
    """Serialize DDL on ``table`` (and its partitions) with every other transaction that
    creates or alters it; held until the caller's transaction ends."""
    await conn.execute("SELECT pg_advisory_xact_lock($1)", ddl_lock_key(table))


async def relations(conn: Conn, names: list[str]) -> set[str]:
    """Which of ``names`` exist in the schema tables are created in (committed, or
    created by this transaction)."""
    rows = await conn.fetch(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND c.relname = ANY($1::text[])", names)
    return {r["relname"] for r in rows}


async def table_columns(conn: Conn, table: str) -> dict[str, str]:
    """``table``'s columns and their types, in their order (empty when there is no such
    table)."""
    rows = await conn.fetch(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS t FROM pg_attribute a "
        "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND c.relname = $1 AND a.attnum > 0 "
        "AND NOT a.attisdropped ORDER BY a.attnum", table)
    return {r["attname"]: r["t"] for r in rows}
