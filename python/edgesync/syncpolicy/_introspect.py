"""Introspection of an uploaded sample SQLite database: its tables, their columns and
types, and a suggested strategy per table (the console's "Schema sources" step).

The upload is written to a private temporary file and opened read-only and immutable,
so nothing of it can run (no triggers fire, no WAL is replayed) and nothing is kept. The
tables are found exactly as the agent finds them (``agent.capture``), so a table the
agent would skip is never suggested.

Suggestion, per table (a person picks the final strategy):

* a timestamp-like column (declared DATETIME/TIMESTAMP/DATE, or named ``ts``,
  ``timestamp``, ``time``, ``*_at``, ``*_ts``, ``*_time``) and no primary key, or a
  name that reads as a time series (``*log*``, ``*event*``, ``*reading*``, ``*metric*``,
  ``*telemetry*``, ``*sample*``) → ``telemetry`` with that ``ts_column``;
* otherwise a primary key → ``rows``;
* otherwise → ``ignore`` (``rows`` needs a primary key, ``telemetry`` a timestamp).
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgesync.agent.capture import list_user_tables, read_table
from edgesync.errors import InvalidRequestError

__all__ = ["MAX_SAMPLE_BYTES", "SampleTable", "introspect_sample"]

MAX_SAMPLE_BYTES = 64 * 1024 * 1024
_SQLITE_MAGIC = b"SQLite format 3\x00"
_TS_TYPE = re.compile(r"DATE|TIME", re.IGNORECASE)
_TS_NAME = re.compile(r"^(ts|timestamp|time|datetime|.*_(at|ts|time))$", re.IGNORECASE)
_SERIES_NAME = re.compile(r"log|event|reading|metric|telemetry|sample|measurement",
                          re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class SampleTable:
    name: str
    columns: list[dict[str, Any]]  # name, type, primary_key (1-based position or 0), not_null
    row_count: int
    suggested: dict[str, Any]  # a table_strategies entry
    reason: str  # why that suggestion


def _ts_column(columns: list[dict[str, Any]]) -> str | None:
    by_type = [c["name"] for c in columns if _TS_TYPE.search(c["type"] or "")]
    by_name = [c["name"] for c in columns if _TS_NAME.match(c["name"])]
    found = by_type + [n for n in by_name if n not in by_type]
    return found[0] if found else None


def _suggest(name: str, columns: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    has_pk = any(c["primary_key"] for c in columns)
    ts = _ts_column(columns)
    if ts is not None and (not has_pk or _SERIES_NAME.search(name)):
        why = "no primary key" if not has_pk else "its name reads as a time series"
        return {"strategy": "telemetry", "ts_column": ts}, f"timestamp column {ts!r}, {why}"
    if has_pk:
        return {"strategy": "rows"}, "has a primary key"
    return {"strategy": "ignore"}, "no primary key (rows) and no timestamp column (telemetry)"


def introspect_sample(data: bytes) -> list[SampleTable]:
    """The user tables of a SQLite database file's bytes; InvalidRequestError (field
    ``file``) when they are not one."""
    if not data:
        raise InvalidRequestError("file", "the upload is empty: send the bytes of a SQLite .db")
    if len(data) > MAX_SAMPLE_BYTES:
        raise InvalidRequestError("file", f"a sample database may be at most "
                                          f"{MAX_SAMPLE_BYTES // (1024 * 1024)} MiB")
    if not data.startswith(_SQLITE_MAGIC):
        raise InvalidRequestError("file", "not a SQLite database (no 'SQLite format 3' header)")
    fd, name = tempfile.mkstemp(suffix=".db", prefix="edgesync-sample-")
    path = Path(name)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        uri = f"{path.as_uri()}?mode=ro&immutable=1"
        try:
            with contextlib.closing(sqlite3.connect(uri, uri=True)) as db:
                return [_table(db, t) for t in list_user_tables(db)]
        except sqlite3.DatabaseError as exc:
            raise InvalidRequestError("file", f"not a readable SQLite database: {exc}") from exc
    finally:
        path.unlink(missing_ok=True)


def _table(db: sqlite3.Connection, name: str) -> SampleTable:
    info = read_table(db, name)
    columns = [{"name": c.name, "type": c.decl_type, "primary_key": c.pk_ordinal,
                "not_null": c.not_null} for c in info.columns]
    quoted = '"' + name.replace('"', '""') + '"'
    count = int(db.execute(f"SELECT count(*) FROM {quoted}").fetchone()[0])
    suggested, reason = _suggest(name, columns)
    return SampleTable(name, columns, count, suggested, reason)
