"""Which tables of the application database replicate, and what their columns are.

User tables are every ordinary table except SQLite's own (``sqlite_*``), edgesync's
(``__edgesync_*``), virtual tables and the shadow tables behind them. Each is then
sorted by its configured strategy: unlisted tables replicate as ``rows``; ``rows``
needs an explicit PRIMARY KEY (rowid-only tables are refused with a warning while the
others keep running); ``ignore`` is skipped; ``telemetry`` needs its ``ts_column`` (and
every ``include_columns`` entry) to exist.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field

from edgesync import _core
from edgesync.agent.config import ReplicationConfig
from edgesync.protocol import StrategyKind

__all__ = ["Column", "Discovery", "TableInfo", "TelemetryTable", "discover", "list_user_tables",
           "read_table", "telemetry_table"]

log = logging.getLogger("edgesync.agent")


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    decl_type: str
    pk_ordinal: int  # 1-based position in the primary key; 0 when not part of it
    not_null: bool


@dataclass(frozen=True, slots=True)
class TableInfo:
    name: str
    columns: tuple[Column, ...]

    @property
    def pk_columns(self) -> tuple[Column, ...]:
        return tuple(sorted((c for c in self.columns if c.pk_ordinal > 0),
                            key=lambda c: c.pk_ordinal))

    def fingerprint(self) -> tuple[str, str]:
        """``(schema_hash, canonical_json)`` as computed by the Rust core."""
        return _core.schema_fingerprint(
            self.name, [(c.name, c.decl_type, c.pk_ordinal, c.not_null) for c in self.columns])


@dataclass(frozen=True, slots=True)
class TelemetryTable:
    name: str
    ts_column: str
    key_columns: tuple[str, ...]  # empty: the rowid is the key
    field_columns: tuple[str, ...]
    sent: TableInfo  # the columns that travel, for the fingerprint

    def fingerprint(self) -> tuple[str, str]:
        return self.sent.fingerprint()


def telemetry_table(info: TableInfo, ts_column: str,
                    include: Sequence[str] | None) -> TelemetryTable | str:
    """Describe a telemetry table, or say why it cannot be captured."""
    names = [c.name for c in info.columns]
    if ts_column not in names:
        return f"ts_column {ts_column!r} is not a column of the table"
    fields = tuple(include) if include is not None else tuple(n for n in names
                                                               if n != ts_column)
    missing = [f for f in fields if f not in names]
    if missing:
        return f"include_columns names missing column(s) {missing}"
    # The timestamp also travels as a field, as the application stored it: the schema
    # (and so the reviewed, mirrored columns) includes it, and a mirrored column that no
    # row fills would read NULL in every row. ``ts`` (parsed) still sets event_ts.
    fields = (ts_column, *(f for f in fields if f != ts_column))
    keys = tuple(c.name for c in info.pk_columns)
    travel = {ts_column, *fields}
    whole_pk = all(k in travel for k in keys)
    cols = tuple(Column(c.name, c.decl_type, c.pk_ordinal if whole_pk else 0, c.not_null)
                 for c in info.columns if c.name in travel)
    return TelemetryTable(info.name, ts_column, keys, fields, TableInfo(info.name, cols))


@dataclass(slots=True)
class Discovery:
    rows: list[TableInfo] = field(default_factory=list)
    telemetry: list[TelemetryTable] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # table -> reason


def list_user_tables(db: sqlite3.Connection) -> list[str]:
    """Ordinary tables of ``main`` that an application owns, in name order."""
    found = db.execute(
        "SELECT name, coalesce(sql, '') FROM sqlite_schema WHERE type = 'table' "
        "ORDER BY name").fetchall()
    virtual = [n for n, sql in found if sql.lstrip().upper().startswith("CREATE VIRTUAL")]
    out = []
    for name, _sql in found:
        if name.startswith(("sqlite_", "__edgesync_")) or name in virtual:
            continue
        if any(name.startswith(v + "_") for v in virtual):
            continue  # shadow table of a virtual table (FTS, R*Tree, ...)
        out.append(name)
    return out


def read_table(db: sqlite3.Connection, name: str) -> TableInfo:
    """Columns of ``name`` from ``pragma_table_xinfo`` (generated columns included)."""
    rows = db.execute(
        "SELECT name, type, pk, \"notnull\", hidden FROM pragma_table_xinfo(?) ORDER BY cid",
        (name,)).fetchall()
    cols = tuple(Column(str(n), str(t or ""), int(pk), bool(nn))
                 for n, t, pk, nn, hidden in rows if hidden != 1)
    return TableInfo(name, cols)


def discover(db: sqlite3.Connection, replication: ReplicationConfig) -> Discovery:
    """Tables to capture as ``rows``, and why each other user table is left out."""
    result = Discovery()
    for name in list_user_tables(db):
        strategy = replication.strategy_for(name).strategy
        if strategy == StrategyKind.IGNORE:
            result.skipped[name] = "strategy ignore"
            continue
        info = read_table(db, name)
        if strategy == StrategyKind.TELEMETRY:
            ts = replication.strategy_for(name)
            assert ts.ts_column is not None  # the config refuses telemetry without it
            got = telemetry_table(info, ts.ts_column, ts.include_columns)
            if isinstance(got, str):
                log.warning("telemetry table %r is skipped: %s", name, got)
                result.skipped[name] = got
            else:
                result.telemetry.append(got)
            continue
        if not info.pk_columns:
            log.warning(
                "table %r has no explicit PRIMARY KEY; it cannot replicate as rows and is "
                "skipped (a time series: set table_strategies.%s to {strategy: telemetry, "
                "ts_column: <its time column>}; otherwise add a PRIMARY KEY, or set strategy: "
                "ignore to silence this)", name, name)
            result.skipped[name] = "no explicit PRIMARY KEY"
            continue
        result.rows.append(info)
    present = ({t.name for t in result.rows} | {t.name for t in result.telemetry}
               | set(result.skipped))
    for name in replication.table_strategies:
        if name not in present:
            log.info("table %r is configured but does not exist in the source database", name)
    return result
