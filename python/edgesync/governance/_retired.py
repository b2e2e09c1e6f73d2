"""Retired columns: target columns a lineage's approval stopped writing.

A breaking approval (a column dropped, renamed or retyped under a new name) leaves the old
target column in place with its last values: user data is never dropped. It is recorded
here so the lineage detail says so (``retired_columns``) instead of the column silently
going stale; an operator keeps it, drops it by hand, or maps a column to it again (which
takes it off the list). This module is ``edge_retired_columns``' one writer.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from edgesync.governance._approval_check import RetiredColumn
from edgesync.store import Conn, from_record

__all__ = ["RetiredRecord", "list_retired", "record_retired"]


@dataclass(frozen=True, slots=True)
class RetiredRecord:
    name: str
    pg_type: str
    source_column_name: str
    retired_by_schema_hash: str
    retired_at: datetime


async def record_retired(conn: Conn, lineage_id: uuid.UUID, table: str, schema_hash: str,
                         retired: list[RetiredColumn], written: list[str]) -> None:
    """After an approval of ``schema_hash`` into ``table``: ``retired`` columns are no longer
    written (the first retirement of a column keeps its time); ``written`` ones are again."""
    await conn.execute(
        "DELETE FROM edge_retired_columns WHERE lineage_id = $1 AND target_table = $2 "
        "AND column_name = ANY($3::text[])", lineage_id, table, written)
    if retired:
        await conn.execute(
            "INSERT INTO edge_retired_columns (lineage_id, target_table, column_name, pg_type, "
            "source_column_name, retired_by_schema_hash) SELECT $1, $2, c.name, c.typ, c.src, $3 "
            "FROM unnest($4::text[], $5::text[], $6::text[]) AS c(name, typ, src) "
            "ON CONFLICT DO NOTHING", lineage_id, table, schema_hash,
            [r.name for r in retired], [r.pg_type for r in retired],
            [r.source_column_name for r in retired])


async def list_retired(conn: Conn, lineage_id: uuid.UUID, table: str | None
                       ) -> list[RetiredRecord]:
    """The retired columns of the lineage's current target, oldest first."""
    rows = await conn.fetch(
        "SELECT column_name AS name, pg_type, source_column_name, retired_by_schema_hash, "
        "retired_at FROM edge_retired_columns WHERE lineage_id = $1 AND target_table = $2 "
        "ORDER BY retired_at, column_name", lineage_id, table)
    return [from_record(RetiredRecord, r) for r in rows]
