"""Which tables of the application database replicate, and what their columns are.

User tables are every ordinary table except SQLite's own (``sqlite_*``), edgesync's
(``__edgesync_*``), virtual tables and the shadow tables behind them. Each is then
sorted by its configured strategy: unlisted tables replicate as ``rows``; ``rows``
needs an explicit PRIMARY KEY (rowid-only tables are refused with a warning while the
others keep running); ``ignore`` is skipped; ``telemetry`` is not captured yet.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass, field

from edgesync import _core
from edgesync.agent._config import ReplicationConfig

__all__ = ["Column", "Discovery", "TableInfo", "discover", "list_user_tables", "read_table"]

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


@dataclass(slots=True)
class Discovery:
    rows: list[TableInfo] = field(default_factory=list)
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
        if strategy == "ignore":
            result.skipped[name] = "strategy ignore"
            continue
        if strategy == "telemetry":
            log.warning("table %r: strategy telemetry is not supported yet; not captured", name)
            result.skipped[name] = "strategy telemetry is not supported yet"
            continue
        info = read_table(db, name)
        if not info.pk_columns:
            log.warning(
                "table %r has no explicit PRIMARY KEY; it cannot replicate as rows and is "
                "skipped (add a PRIMARY KEY, or set strategy: ignore to silence this)", name)
            result.skipped[name] = "no explicit PRIMARY KEY"
            continue
        result.rows.append(info)
    present = {t.name for t in result.rows} | set(result.skipped)
    for name in replication.table_strategies:
        if name not in present:
            log.info("table %r is configured but does not exist in the source database", name)
    return result
