"""The application's SQLite database as the agent opens it, and what ``agent validate``
checks in it without connecting anywhere.

A path that is not a SQLite file (a YAML file, a CSV, a directory) is a one-line
``ConfigError`` naming ``sqlite-replication.source_db_path``: SQLite itself opens any
file and only fails at the first query, deep in trigger installation.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from edgesync.agent.capture._discovery import list_user_tables, read_table, telemetry_table
from edgesync.agent.config import AgentConfig, ReplicationConfig, read_config
from edgesync.errors import ConfigError
from edgesync.protocol import StrategyKind

__all__ = ["check_source", "check_tables", "open_source", "validate_config"]

SOURCE_FIELD = "sqlite-replication.source_db_path"


def check_source(path: Path) -> None:
    """Raise the one-line ConfigError ``open_source`` would (no such file, not SQLite),
    before anything is set up for it: an agent refused for its source leaves no lock
    file beside a database that does not exist, and is told its own mistake, not that
    another agent holds the state database it would share."""
    open_source(path, read_only=True).close()


def open_source(path: Path, *, read_only: bool = False) -> sqlite3.Connection:
    """An autocommit connection to the source database, checked to be SQLite."""
    if not path.is_file():
        where = ("it is a directory; give the database file in it" if path.is_dir()
                 else f"a relative path is read from the working directory, {os.getcwd()}"
                 if not path.is_absolute() else "")
        raise ConfigError(SOURCE_FIELD, f"file {str(path)!r} does not exist"
                          + (f" ({where})" if where else ""))
    uri = path.resolve().as_uri() + ("?mode=ro" if read_only else "?mode=rw")
    try:
        db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise ConfigError(SOURCE_FIELD, f"cannot open {str(path)!r}: {exc}") from exc
    try:
        db.execute("SELECT count(*) FROM sqlite_schema").fetchone()
    except sqlite3.DatabaseError as exc:
        db.close()
        if "not a database" in str(exc):
            raise ConfigError(SOURCE_FIELD, f"{str(path)!r} is not a SQLite database; give "
                                            "the path of your application's SQLite file"
                              ) from exc
        raise ConfigError(SOURCE_FIELD, f"cannot read {str(path)!r}: {exc}") from exc
    return db


def check_tables(db: sqlite3.Connection, rep: ReplicationConfig) -> list[ConfigError]:
    """Every configured table that does not exist or cannot be captured as configured."""
    present = set(list_user_tables(db))
    problems: list[ConfigError] = []
    for name, ts in rep.table_strategies.items():
        base = f"sqlite-replication.table_strategies.{name}"
        if ts.strategy == StrategyKind.IGNORE or name.startswith(("sqlite_", "__edgesync_")):
            continue
        if name not in present:
            problems.append(ConfigError(base, f"no table {name!r} in the source database"
                                              + _similar(name, present)))
            continue
        info = read_table(db, name)
        if ts.strategy == StrategyKind.TELEMETRY:
            assert ts.ts_column is not None  # the config refuses telemetry without it
            columns = [c.name for c in info.columns]
            if ts.ts_column not in columns:
                problems.append(ConfigError(f"{base}.ts_column", f"{ts.ts_column!r} is not a "
                                            f"column of {name!r} (columns: "
                                            f"{', '.join(columns)})"))
            elif isinstance(got := telemetry_table(info, ts.ts_column, ts.include_columns), str):
                problems.append(ConfigError(f"{base}.include_columns",
                                            f"{got} (columns: {', '.join(columns)})"))
        elif not info.pk_columns:
            problems.append(ConfigError(f"{base}.strategy", "rows needs an explicit PRIMARY KEY; "
                                        "add one, or use strategy telemetry or ignore"))
    return problems


def _similar(name: str, present: set[str]) -> str:
    same_case = [t for t in present if t.lower() == name.lower()]
    if same_case:
        return (f" (did you mean {same_case[0]!r}? table names in table_strategies are "
                "case-sensitive)")
    return f" (tables: {', '.join(sorted(present)) or 'none'})"


def validate_config(path: str | os.PathLike[str]) -> list[str]:
    """Every problem of the file as ``field: reason`` lines (empty when valid).

    Also checks what only the device can check without connecting: that the source
    database exists, is SQLite, and has each configured table with the configured
    columns. Meant for ``edgesync agent validate --config FILE``.
    """
    cfg, errors = read_config(path)
    problems = [str(e) for e in errors]
    if cfg is not None:
        problems += [str(e) for e in _check_source(cfg)]
    return problems


def _check_source(cfg: AgentConfig) -> list[ConfigError]:
    try:
        db = open_source(cfg.replication.source_db_path, read_only=True)
    except ConfigError as exc:
        return [exc]
    try:
        return check_tables(db, cfg.replication)
    finally:
        db.close()
