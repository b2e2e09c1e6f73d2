"""Materialization of approved rows into PostgreSQL targets."""

from edgesync.materialize._copies import copy_state_rows, copy_ts_rows, upsert_cloud_row
from edgesync.materialize._data_points import DATA_POINT_TYPES, MappedColumn
from edgesync.materialize._ddl import lock_ddl, table_columns
from edgesync.materialize._identifiers import (
    PLATFORM_COLUMNS,
    check_column_name,
    quote_ident,
    target_table_name,
)
from edgesync.materialize._retention import drop_partitions_before
from edgesync.materialize._state_target import StateTarget
from edgesync.materialize._sweep import sweep_state_rows
from edgesync.materialize._ts_target import TS_PLATFORM_COLUMNS, TsTarget, ts_table_name
from edgesync.materialize._types import PG_TYPES, MirrorColumn, pg_type_for
from edgesync.materialize._writer import (
    LINEAGE_ERRORS,
    ROW_ERRORS,
    WRITE_ERRORS,
    RowFailure,
    WriteItem,
    split_on,
    write_batches,
    write_rows_apart,
)

__all__ = [
    "DATA_POINT_TYPES",
    "LINEAGE_ERRORS",
    "PG_TYPES",
    "PLATFORM_COLUMNS",
    "ROW_ERRORS",
    "TS_PLATFORM_COLUMNS",
    "WRITE_ERRORS",
    "MappedColumn",
    "MirrorColumn",
    "RowFailure",
    "StateTarget",
    "TsTarget",
    "WriteItem",
    "check_column_name",
    "copy_state_rows",
    "copy_ts_rows",
    "drop_partitions_before",
    "lock_ddl",
    "pg_type_for",
    "quote_ident",
    "split_on",
    "sweep_state_rows",
    "table_columns",
    "target_table_name",
    "ts_table_name",
    "upsert_cloud_row",
    "write_batches",
    "write_rows_apart",
]
