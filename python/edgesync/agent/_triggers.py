"""The change journal and the triggers that fill it, inside the application database.

The triggers run in the application's own connection, so they use built-in SQL
functions only. Each row change appends one journal row (two for a primary-key
update: a ``delete`` of the old key, then an ``update`` carrying the new key and row).

Value encoding in ``pk_json``/``row_json`` (one JSON object per row, column → value):

* INTEGER, TEXT, NULL: as JSON does.
* REAL: 17 significant digits (SQLite's ``json_object`` keeps only 15); ±infinity as
  ``±9e999``.
* BLOB: ``{"$blob": "<UPPERCASE HEX>"}``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from edgesync.agent._discovery import Column, TableInfo
from edgesync.agent._uuid7 import uuid7

__all__ = [
    "JOURNAL_TABLE",
    "META_TABLE",
    "TRIGGER_PREFIX",
    "install_triggers",
    "quote_ident",
    "quote_literal",
    "trigger_names",
    "trigger_sql",
]

JOURNAL_TABLE = "__edgesync_journal"
META_TABLE = "__edgesync_meta"
TRIGGER_PREFIX = "__edgesync_"

# json_object() takes at most SQLITE_MAX_FUNCTION_ARG (127 by default) arguments.
_JSON_OBJECT_MAX_COLUMNS = 63

_JOURNAL_DDL = f"""
CREATE TABLE IF NOT EXISTS "{JOURNAL_TABLE}" (
    commit_seq  INTEGER PRIMARY KEY AUTOINCREMENT,
    table_name  TEXT NOT NULL,
    op          TEXT NOT NULL CHECK (op IN ('insert', 'update', 'delete')),
    pk_json     TEXT NOT NULL,
    row_json    TEXT,
    captured_at INTEGER NOT NULL
        DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))
)"""
_JOURNAL_INDEX = (f'CREATE INDEX IF NOT EXISTS "{JOURNAL_TABLE}_by_table" '
                  f'ON "{JOURNAL_TABLE}" (table_name, commit_seq)')
_META_DDL = (f'CREATE TABLE IF NOT EXISTS "{META_TABLE}" '
             "(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID")


def quote_ident(name: str) -> str:
    """SQL identifier in double quotes, embedded quotes doubled."""
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    """SQL string literal in single quotes, embedded quotes doubled."""
    return "'" + text.replace("'", "''") + "'"


def trigger_names(table: str) -> tuple[str, str, str]:
    return (f"{TRIGGER_PREFIX}{table}_ins", f"{TRIGGER_PREFIX}{table}_upd",
            f"{TRIGGER_PREFIX}{table}_del")


def _value(ref: str) -> str:
    """JSON-ready expression for one column value (see module docstring)."""
    return (
        f"CASE typeof({ref}) "
        f"WHEN 'blob' THEN json_object('$blob', hex({ref})) "
        f"WHEN 'real' THEN CASE WHEN {ref} - {ref} = 0 THEN json(printf('%!.17g', {ref})) "
        f"WHEN {ref} > 0 THEN json('9e999') ELSE json('-9e999') END "
        f"ELSE {ref} END"
    )


def _object(alias: str, columns: Sequence[Column]) -> str:
    """JSON object text of ``columns`` of the ``NEW``/``OLD`` row."""
    pairs = [(quote_literal(c.name), _value(f"{alias}.{quote_ident(c.name)}")) for c in columns]
    if len(pairs) <= _JSON_OBJECT_MAX_COLUMNS:
        return "json_object(" + ", ".join(f"{k}, {v}" for k, v in pairs) + ")"
    # Wide table: concatenate. json_quote() keeps JSON values (blobs, reals) as they are.
    parts = [f"json_quote({k}) || ':' || json_quote({v})" for k, v in pairs]
    return "('{' || " + " || ',' || ".join(parts) + " || '}')"


def _pk_changed(pk: Sequence[Column]) -> str:
    terms = []
    for c in pk:
        o, n = f"OLD.{quote_ident(c.name)}", f"NEW.{quote_ident(c.name)}"
        terms.append(f"NOT ({o} IS {n} COLLATE BINARY AND typeof({o}) = typeof({n}))")
    return " OR ".join(terms)


def trigger_sql(table: TableInfo) -> list[str]:
    """``CREATE TRIGGER`` statements (insert, update, delete) for a rows table."""
    pk = table.pk_columns
    if not pk:
        raise ValueError(f"table {table.name!r} has no primary key")
    t, lit = quote_ident(table.name), quote_literal(table.name)
    ins, upd, dele = (quote_ident(n) for n in trigger_names(table.name))
    journal = f"{quote_ident(JOURNAL_TABLE)} (table_name, op, pk_json, row_json)"
    new_pk, old_pk = _object("NEW", pk), _object("OLD", pk)
    new_row = _object("NEW", table.columns)
    return [
        f"CREATE TRIGGER {ins} AFTER INSERT ON {t} BEGIN "
        f"INSERT INTO {journal} VALUES ({lit}, 'insert', {new_pk}, {new_row}); END",
        # A changed primary key is a delete of the old key followed by the new row, so
        # the cloud does not keep the old key as a ghost row.
        f"CREATE TRIGGER {upd} AFTER UPDATE ON {t} BEGIN "
        f"INSERT INTO {journal} SELECT {lit}, 'delete', {old_pk}, NULL "
        f"WHERE {_pk_changed(pk)}; "
        f"INSERT INTO {journal} VALUES ({lit}, 'update', {new_pk}, {new_row}); END",
        f"CREATE TRIGGER {dele} AFTER DELETE ON {t} BEGIN "
        f"INSERT INTO {journal} VALUES ({lit}, 'delete', {old_pk}, NULL); END",
    ]


def _ensure_journal(db: sqlite3.Connection) -> str:
    """Create the journal if needed; return its id (new id whenever it was (re)created)."""
    existed = db.execute("SELECT 1 FROM sqlite_schema WHERE type='table' AND name=?",
                         (JOURNAL_TABLE,)).fetchone() is not None
    db.execute(_JOURNAL_DDL)
    db.execute(_JOURNAL_INDEX)
    db.execute(_META_DDL)
    row = db.execute(f"SELECT value FROM {quote_ident(META_TABLE)} WHERE key='journal_id'"
                     ).fetchone()
    if existed and row is not None:
        return str(row[0])
    journal_id = uuid7()
    db.execute(f"INSERT OR REPLACE INTO {quote_ident(META_TABLE)} VALUES ('journal_id', ?)",
               (journal_id,))
    return journal_id


def install_triggers(db: sqlite3.Connection, tables: Sequence[TableInfo], *,
                     busy_timeout_ms: int = 5000) -> str:
    """Create the journal and (re)create the triggers of ``tables`` in one transaction.

    Every edgesync trigger not belonging to ``tables`` (a table now ignored, dropped or
    without a primary key) is dropped. Idempotent. ``db`` must be in autocommit mode
    (``isolation_level=None``). Returns the journal id.
    """
    db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    db.execute("BEGIN IMMEDIATE")
    try:
        journal_id = _ensure_journal(db)
        old = db.execute(
            "SELECT name FROM sqlite_schema WHERE type='trigger' AND substr(name, 1, ?) = ?",
            (len(TRIGGER_PREFIX), TRIGGER_PREFIX)).fetchall()
        for (name,) in old:
            db.execute(f"DROP TRIGGER IF EXISTS {quote_ident(name)}")
        for table in tables:
            for stmt in trigger_sql(table):
                db.execute(stmt)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return journal_id
