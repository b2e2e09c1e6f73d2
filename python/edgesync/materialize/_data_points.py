"""Mapped columns: values written to device data points next to the target rows.

A column approved with ``map`` (or ``auto_create_and_map``) is not a column of the
target table; each value goes to ``edge_data_point_values`` as
``(data_point_id, device_id, source_key, source_version, ts, value)``:

* state rows: only changes that won the newer-wins upsert (deletes excluded), keyed
  by ``source_pk_hash`` and ``'{journal_epoch}/{commit_seq}'``, stamped with the
  time the cloud applied them (``clock_timestamp()``: state rows carry no event time);
* telemetry rows: every row, keyed by ``row_id`` (or ``{batch_id}#{n}`` without
  one), stamped with its ``event_ts``.

Writes are ``ON CONFLICT DO NOTHING`` on that key, so a change written twice
(redelivery, replay after a crash) leaves one value.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass

from edgesync._core import TelemetryBatch
from edgesync.store import Conn

__all__ = ["DATA_POINT_TYPES", "MappedColumn", "state_values_sql", "write_telemetry_values"]

# Data point value type → the PostgreSQL type the value is checked against before it
# becomes JSON (the same encoder and error as mirrored columns).
DATA_POINT_TYPES = {
    "integer": "bigint",
    "real": "double precision",
    "numeric": "numeric",
    "text": "text",
    "boolean": "boolean",
    "blob": "bytea",
    "json": "jsonb",
}

_temp_names = itertools.count()


@dataclass(frozen=True, slots=True)
class MappedColumn:
    source: str
    pg_type: str
    data_point_id: uuid.UUID


def _temp_column(i: int) -> str:
    # The reserved _edge_ prefix: never a mirrored column name.
    return f"_edge_m{i}"


def temp_columns_ddl(mapped: list[MappedColumn]) -> str:
    return "".join(f", {_temp_column(i)} {m.pg_type}" for i, m in enumerate(mapped))


def _lateral(mapped: list[MappedColumn], alias: str) -> str:
    rows = ", ".join(f"('{m.data_point_id}'::uuid, to_jsonb({alias}.{_temp_column(i)}))"
                     for i, m in enumerate(mapped))
    return f"CROSS JOIN LATERAL (VALUES {rows}) AS m(dp, v)"


def state_values_sql(upsert: str, staging: str, mapped: list[MappedColumn]) -> str:
    """Wrap a state upsert (``INSERT … ON CONFLICT … WHERE newer``, ``$1`` = device id)
    so that the mapped values of the rows it actually wrote are recorded too. The
    statement returns the number of target rows written."""
    return (
        f"WITH won AS ({upsert} RETURNING t._edge_pk_hash, t._edge_journal_epoch, "
        "t._edge_commit_seq, t._edge_deleted), "
        "dp AS (INSERT INTO edge_data_point_values (data_point_id, device_id, source_key, "
        "source_version, ts, value) "
        "SELECT m.dp, $1::uuid, s._edge_pk_hash, "
        "s._edge_epoch::text || '/' || s._edge_seq::text, clock_timestamp(), m.v "
        f"FROM won JOIN {staging} s ON s._edge_pk_hash = won._edge_pk_hash "
        "AND s._edge_epoch = won._edge_journal_epoch AND s._edge_seq = won._edge_commit_seq "
        f"{_lateral(mapped, 's')} WHERE NOT won._edge_deleted "
        "ON CONFLICT DO NOTHING) "
        "SELECT count(*) FROM won")


def encode_telemetry_values(batch: TelemetryBatch, mapped: list[MappedColumn]) -> bytes:
    """COPY text of ``event_ts, row_id, mapped…`` (raises BatchRejected on a value that
    does not fit, before anything is written)."""
    return batch.encode_telemetry_copy([(m.source, m.pg_type) for m in mapped])


async def write_telemetry_values(conn: Conn, device_id: uuid.UUID, batch: TelemetryBatch,
                                 mapped: list[MappedColumn], copy: bytes) -> None:
    """Record the mapped values of a telemetry batch (``copy`` from
    ``encode_telemetry_values``), in the caller's transaction."""
    tmp = f"_edge_dp_in_{next(_temp_names)}"
    await conn.execute(
        f"CREATE TEMP TABLE {tmp} (_edge_n bigserial, event_ts timestamptz, row_id uuid"
        f"{temp_columns_ddl(mapped)}) ON COMMIT DROP")
    # A memoryview: asyncpg would take plain bytes for a file path.
    await conn.copy_to_table(
        tmp, source=memoryview(copy),  # type: ignore[arg-type]
        columns=["event_ts", "row_id", *(_temp_column(i) for i in range(len(mapped)))],
        format="text")
    await conn.execute(
        "INSERT INTO edge_data_point_values (data_point_id, device_id, source_key, "
        "source_version, ts, value) "
        "SELECT m.dp, $1::uuid, coalesce(x.row_id::text, $2 || '#' || x._edge_n::text), '', "
        f"x.event_ts, m.v FROM {tmp} x {_lateral(mapped, 'x')} ON CONFLICT DO NOTHING",
        device_id, batch.batch_id)
    await conn.execute(f"DROP TABLE IF EXISTS {tmp}")
