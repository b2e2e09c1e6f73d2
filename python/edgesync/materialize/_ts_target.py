"""``edge_ts_*`` tables: time-partitioned telemetry targets, written with COPY.

One table per (project, source table) — ``edge_ts_p{project8}_{table}`` — shared by
every device of the project: ``device_id uuid, event_ts timestamptz, row_id uuid``
plus the approved fields. It is RANGE-partitioned by ``event_ts`` into daily
partitions, created on demand for each batch's time range (and the following day, so
midnight never waits on DDL), plus a DEFAULT partition so no row is ever refused; an
index on ``(device_id, event_ts)`` serves per-device time queries.

Rows are COPYed straight into the parent table, with no per-row uniqueness check:
exactly-once comes from the batch ledger, whose ``(device_id, batch_id)`` row commits
in the same transaction as the COPY (a redelivery is a no-op before it gets here), and
the ``batch_seq`` rules refuse any *new* batch that would carry an accepted sequence
again. A unique key on ``(device_id, row_id, event_ts)`` would add a unique-index
probe per row and force COPY through a temporary table and ``INSERT … ON CONFLICT``,
for duplicates the ledger already excludes.
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Literal

from edgesync._core import TelemetryBatch
from edgesync.materialize._data_points import (
    MappedColumn,
    encode_telemetry_values,
    write_telemetry_values,
)
from edgesync.materialize._ddl import lock_ddl, relations, table_columns
from edgesync.materialize._identifiers import MAX_IDENT_BYTES, quote_ident, target_table_name
from edgesync.materialize._types import MirrorColumn, copy_format, copy_stream
from edgesync.store import Conn

__all__ = ["TS_PLATFORM_COLUMNS", "TsRows", "TsTarget", "ts_table_name"]

TS_PLATFORM_COLUMNS = ("device_id", "event_ts", "row_id")
# A batch spanning more days than this gets partitions for its first and last day
# only; rows in between go to the DEFAULT partition (a device clock gone wrong must
# not create thousands of tables).
_MAX_SPAN_DAYS = 8
# Partitions known to exist (this process saw them in the catalog): most batches then
# need no catalog query at all.
_seen_partitions: set[str] = set()
# (table, first day, last day) of batches whose partitions were all known: the next
# batch of those days is answered without working the names out again.
_seen_spans: set[tuple[str, date, date]] = set()


@dataclass(frozen=True, slots=True)
class TsRows:
    """One telemetry batch encoded for its target."""

    device_id: uuid.UUID
    batch: TelemetryBatch
    copy: bytes
    values: bytes | None


def ts_table_name(project_id: uuid.UUID, source_table: str) -> str:
    """Project-coalesced target name: ``edge_ts_p{project8}_{table}``."""
    return target_table_name(f"edge_ts_p{project_id.hex[:8]}_", source_table)


def _part_name(table: str, suffix: str) -> str:
    name = f"{table}_{suffix}"
    if len(name.encode()) <= MAX_IDENT_BYTES:
        return name
    digest = hashlib.sha256(table.encode()).hexdigest()[:8]
    room = MAX_IDENT_BYTES - len(suffix) - len(digest) - 2
    return f"{table[:room]}_{digest}_{suffix}"


class TsTarget:
    def __init__(self, table: str, columns: list[MirrorColumn],
                 mapped: list[MappedColumn] | None = None) -> None:
        self.table = table
        self.columns = columns
        # Fields approved with map / auto_create_and_map: device data point values.
        self.mapped = list(mapped or [])

    @property
    def default_partition(self) -> str:
        return _part_name(self.table, "default")

    async def provision(self, conn: Conn) -> None:
        """Create the partitioned table, its DEFAULT partition and index, or add the
        columns a newer schema brought (idempotent, safe against concurrent callers)."""
        await lock_ddl(conn, self.table)
        q = quote_ident(self.table)
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {q} (device_id uuid NOT NULL, "
            "event_ts timestamptz NOT NULL, row_id uuid) PARTITION BY RANGE (event_ts)")
        await conn.execute(f"CREATE TABLE IF NOT EXISTS {quote_ident(self.default_partition)} "
                           f"PARTITION OF {q} DEFAULT")
        await conn.execute(
            f"CREATE INDEX IF NOT EXISTS {quote_ident(_part_name(self.table, 'dev_ts'))} "
            f"ON {q} (device_id, event_ts)")
        for col in self.columns:
            await conn.execute(
                f"ALTER TABLE {q} ADD COLUMN IF NOT EXISTS {quote_ident(col.target)} {col.pg_type}")

    async def ensure_partitions(self, conn: Conn, first: datetime, last: datetime) -> int:
        """Daily partitions for ``[first, last]`` and the day after; returns how many
        were created. One catalog query when they all exist."""
        d0, d1 = first.astimezone(UTC).date(), last.astimezone(UTC).date()
        if (self.table, d0, d1) in _seen_spans:  # every batch of a day after the first
            return 0
        span = (d1 - d0).days
        days = ([d0 + timedelta(days=i) for i in range(span + 1)] if span <= _MAX_SPAN_DAYS
                else [d0, d1])
        days.append(d1 + timedelta(days=1))
        names = {n: d for d in days
                 if (n := _part_name(self.table, f"d{d:%Y%m%d}")) not in _seen_partitions}
        if not names:
            _seen_spans.add((self.table, d0, d1))
            return 0
        # Partitions found are remembered: one this transaction created could still roll
        # back, and one could be dropped later; either way rows of its day go to DEFAULT.
        known = await relations(conn, list(names))
        _seen_partitions.update(known)
        if len(known) == len(names):
            return 0
        # Checked again under the table's DDL lock, by a query that sees what the lock's
        # last holder committed (``_ddl``): a live group, a replay, a re-snapshot or
        # another worker may have created them meanwhile.
        await lock_ddl(conn, self.table)
        missing = set(names) - await relations(conn, list(names))
        created = 0
        for name in sorted(missing):
            created += await self._create_partition(conn, name, names[name])
        return created

    async def _create_partition(self, conn: Conn, name: str, day: date) -> int:
        """Create one day's partition; the caller holds the table's DDL lock and saw
        that it does not exist."""
        lo = datetime(day.year, day.month, day.day, tzinfo=UTC)
        hi = lo + timedelta(days=1)
        q, part = quote_ident(self.table), quote_ident(name)
        default = quote_ident(self.default_partition)
        bounds = f"FOR VALUES FROM ('{lo.isoformat()}') TO ('{hi.isoformat()}')"
        stray = await conn.fetchval(
            f"SELECT EXISTS (SELECT 1 FROM {default} WHERE event_ts >= $1 AND event_ts < $2)",
            lo, hi)
        if not stray:
            await conn.execute(f"CREATE TABLE {part} PARTITION OF {q} {bounds}")
            return 1
        # Rows of that day already sit in DEFAULT (their batch spanned too many days):
        # move them into the new table, then attach it.
        col_list = ", ".join(quote_ident(c) for c in await table_columns(conn, self.table))
        await conn.execute(f"CREATE TABLE {part} (LIKE {q} INCLUDING DEFAULTS)")
        await conn.execute(
            f"WITH moved AS (DELETE FROM {default} WHERE event_ts >= $1 AND event_ts < $2 "
            f"RETURNING {col_list}) INSERT INTO {part} ({col_list}) SELECT {col_list} FROM moved",
            lo, hi)
        await conn.execute(f"ALTER TABLE {q} ATTACH PARTITION {part} {bounds}")
        return 1

    @functools.cached_property
    def copy_format(self) -> Literal["binary", "text"]:
        # Binary values go straight into the table: only when each column is known to
        # have the type they are encoded for (text input would be converted instead).
        # Asked for each batch of a group: worked out once per target.
        columns = [(c.source, c.pg_type) for c in self.columns]
        checked = all(c.stored_type == c.pg_type for c in self.columns)
        return copy_format(columns) if checked else "text"

    def encode(self, device_id: uuid.UUID, batch: TelemetryBatch) -> TsRows:
        """The batch as COPY data (and its mapped values). Raises BatchRejected for a value
        that does not fit, before anything is written."""
        copy = batch.encode_telemetry_copy([(c.source, c.pg_type) for c in self.columns],
                                           device_id=str(device_id),
                                           binary=self.copy_format == "binary")
        values = encode_telemetry_values(batch, self.mapped) if self.mapped else None
        return TsRows(device_id, batch, copy, values)

    async def apply(self, conn: Conn, device_id: uuid.UUID, batch: TelemetryBatch) -> int:
        """Append one batch; returns the number of rows. Runs inside the caller's
        transaction (the ledger row commits with it)."""
        return await self.write_group(conn, [self.encode(device_id, batch)])

    async def write_group(self, conn: Conn, parts: list[TsRows]) -> int:
        """Append the batches of many devices with one COPY; returns the rows written."""
        for part in parts:  # known partitions cost nothing (see ensure_partitions)
            await self.ensure_partitions(conn, datetime.fromisoformat(part.batch.first_event_ts),
                                         datetime.fromisoformat(part.batch.last_event_ts))
        fmt = self.copy_format
        await conn.copy_to_table(
            self.table, source=copy_stream([p.copy for p in parts], fmt),  # type: ignore[arg-type]
            columns=[*TS_PLATFORM_COLUMNS, *(c.target for c in self.columns)], format=fmt)
        for part in parts:
            if part.values is not None:
                await write_telemetry_values(conn, part.device_id, part.batch, self.mapped,
                                             part.values)
        return sum(p.batch.row_count for p in parts)
