"""The change journal and the triggers that fill it, inside the application database.

The triggers run in the application's own connection, on every row it writes, so they
do as little as possible: each row change appends ``(table_name, op, k0..kN)`` — the
primary-key values, nothing else — to the journal (two rows for a primary-key update:
a ``delete`` of the old key, then an ``update`` of the new one). The row image is read
from the table when the batch is built (``_batcher.journal_query``), so the application pays no
JSON building, and a row changed twice before a flush is read once per change but
always in its latest state (the cloud keeps the newest ``commit_seq`` per key, so
the result is the same).

Value encoding in the JSON the agent builds (``pk`` and ``row`` objects):

* INTEGER, TEXT, NULL: as JSON does.
* REAL: the shortest text that reads back as the same double, with a ``.0`` or an
  exponent (written in Rust, ``edgesync_core::rowjson``); ±infinity as ``null``: JSON has
  no infinity and the cloud refuses a whole batch carrying ``9e999`` (``invalid_number_encoding``).
* BLOB: ``{"$blob": "<UPPERCASE HEX>"}``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from edgesync.agent.capture._discovery import Column, TableInfo
from edgesync.protocol import uuid7

__all__ = [
    "JOURNAL_TABLE",
    "META_TABLE",
    "TRIGGER_PREFIX",
    "Installed",
    "install_triggers",
    "json_object_sql",
    "key_column",
    "quote_ident",
    "quote_literal",
    "trigger_names",
    "trigger_sql",
]

JOURNAL_TABLE = "__edgesync_journal"
META_TABLE = "__edgesync_meta"
TRIGGER_PREFIX = "__edgesync_"

# k0..kN have no declared type, so values keep their storage class; the journal grows
# a column when a table with a wider primary key shows up. No AUTOINCREMENT: it costs
# the application a sqlite_sequence update per row (a fifth of the trigger's price);
# commit_seq is max + 1 instead, and the journal's highest row is never deleted
# (truncate_journal), so a value is never handed out twice.
_JOURNAL_DDL = f"""
CREATE TABLE IF NOT EXISTS "{JOURNAL_TABLE}" (
    commit_seq  INTEGER PRIMARY KEY,
    table_name  TEXT NOT NULL,
    op          TEXT NOT NULL,
    k0
)"""
_META_DDL = (f'CREATE TABLE IF NOT EXISTS "{META_TABLE}" '
             "(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID")
_SNAPSHOT_KEY = "snapshot:"


def key_column(i: int) -> str:
    return f"k{i}"


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
    """JSON text of one column value (see module docstring); never NULL."""
    # quote() prints a REAL with as many digits as it needs to read back exactly;
    # plain text concatenation is three times faster than json_object() + printf().
    return (
        f"CASE typeof({ref}) WHEN 'integer' THEN {ref} "
        f"WHEN 'text' THEN json_quote({ref}) WHEN 'null' THEN 'null' "
        f"WHEN 'real' THEN CASE WHEN {ref} - {ref} = 0 THEN quote({ref}) ELSE 'null' END "
        f"ELSE '{{\"$blob\":\"' || hex({ref}) || '\"}}' END"
    )


def json_object_sql(pairs: Sequence[tuple[str, str]]) -> str:
    """JSON object text of ``(name, SQL expression)`` pairs (see module docstring)."""
    parts = [quote_literal(("{" if i == 0 else ",") + orjson.dumps(name).decode() + ":")
             + f" || {_value(expr)}" for i, (name, expr) in enumerate(pairs)]
    return "(" + " || ".join(parts) + " || '}')"


def _keys(alias: str, pk: Sequence[Column]) -> str:
    return ", ".join(f"{alias}.{quote_ident(c.name)}" for c in pk)


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
    cols = ", ".join(key_column(i) for i in range(len(pk)))
    journal = f"{quote_ident(JOURNAL_TABLE)} (table_name, op, {cols})"
    return [
        f"CREATE TRIGGER {ins} AFTER INSERT ON {t} BEGIN "
        f"INSERT INTO {journal} VALUES ({lit}, 'insert', {_keys('NEW', pk)}); END",
        # A changed primary key is a delete of the old key followed by the new row, so
        # the cloud does not keep the old key as a ghost row.
        f"CREATE TRIGGER {upd} AFTER UPDATE ON {t} BEGIN "
        f"INSERT INTO {journal} SELECT {lit}, 'delete', {_keys('OLD', pk)} "
        f"WHERE {_pk_changed(pk)}; "
        f"INSERT INTO {journal} VALUES ({lit}, 'update', {_keys('NEW', pk)}); END",
        f"CREATE TRIGGER {dele} AFTER DELETE ON {t} BEGIN "
        f"INSERT INTO {journal} VALUES ({lit}, 'delete', {_keys('OLD', pk)}); END",
    ]


def snapshot_sql(table: TableInfo) -> str:
    """Journal every existing row of ``table`` as an ``insert``."""
    pk = table.pk_columns
    cols = ", ".join(key_column(i) for i in range(len(pk)))
    keys = ", ".join(quote_ident(c.name) for c in pk)
    order = ", ".join(quote_ident(c.name) for c in pk)
    return (f"INSERT INTO {quote_ident(JOURNAL_TABLE)} (table_name, op, {cols}) "
            f"SELECT {quote_literal(table.name)}, 'insert', {keys} "
            f"FROM {quote_ident(table.name)} ORDER BY {order}")


def _journal_width(db: sqlite3.Connection) -> tuple[int, bool]:
    """(number of k columns, whether the journal has the current layout)."""
    cols = [r[1] for r in db.execute(f"PRAGMA table_info({quote_ident(JOURNAL_TABLE)})")]
    width = sum(1 for c in cols if c.startswith("k") and c[1:].isdigit())
    return width, cols[:3] == ["commit_seq", "table_name", "op"] and width > 0


def _ensure_journal(db: sqlite3.Connection, width: int) -> str:
    """Create the journal if needed (at least ``width`` key columns); return its id,
    a new one whenever the journal was (re)created."""
    existed = db.execute("SELECT 1 FROM sqlite_schema WHERE type='table' AND name=?",
                         (JOURNAL_TABLE,)).fetchone() is not None
    if existed and not _journal_width(db)[1]:
        # An older layout (the first agent slice stored JSON): rebuilt, new epoch.
        db.execute(f"DROP TABLE {quote_ident(JOURNAL_TABLE)}")
        existed = False
    db.execute(_JOURNAL_DDL)
    have = _journal_width(db)[0]
    for i in range(have, width):
        db.execute(f"ALTER TABLE {quote_ident(JOURNAL_TABLE)} ADD COLUMN {key_column(i)}")
    db.execute(_META_DDL)
    row = db.execute(f"SELECT value FROM {quote_ident(META_TABLE)} WHERE key='journal_id'"
                     ).fetchone()
    if existed and row is not None:
        return str(row[0])
    journal_id = uuid7()
    db.execute(f"DELETE FROM {quote_ident(META_TABLE)}")  # snapshot marks of the old journal
    db.execute(f"INSERT INTO {quote_ident(META_TABLE)} VALUES ('journal_id', ?)",
               (journal_id,))
    return journal_id


@dataclass(frozen=True, slots=True)
class Installed:
    journal_id: str
    snapshotted: tuple[str, ...]  # tables whose existing rows were journaled just now
    rebuilt: tuple[str, ...]      # tables found without their triggers (see install_triggers)


def install_triggers(db: sqlite3.Connection, tables: Sequence[TableInfo], *,
                     busy_timeout_ms: int = 5000, snapshot: bool = False,
                     known: Sequence[str] = ()) -> Installed:
    """Create the journal and (re)create the triggers of ``tables`` in one transaction.

    Every edgesync trigger not belonging to ``tables`` (a table now ignored, dropped or
    without a primary key) is dropped. Idempotent. ``db`` must be in autocommit mode
    (``isolation_level=None``).

    With ``snapshot``, each table seen for the first time in this journal has its
    existing rows journaled as inserts in the same transaction, so there is neither a
    gap nor a duplicate between the snapshot and the triggers. A table in ``known``
    (captured before) whose triggers are missing was rebuilt or recreated behind the
    agent's back (e.g. ``ALTER`` done as create-copy-drop-rename); its rows are
    journaled again the same way, so changes made while it had no triggers still reach
    the cloud.
    """
    db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    db.execute("BEGIN IMMEDIATE")
    try:
        width = max([len(t.pk_columns) for t in tables] + [1])
        journal_id = _ensure_journal(db, width)
        old = {name for (name,) in db.execute(
            "SELECT name FROM sqlite_schema WHERE type='trigger' AND substr(name, 1, ?) = ?",
            (len(TRIGGER_PREFIX), TRIGGER_PREFIX))}
        marks = {k[len(_SNAPSHOT_KEY):] for (k,) in db.execute(
            f"SELECT key FROM {quote_ident(META_TABLE)} WHERE substr(key, 1, ?) = ?",
            (len(_SNAPSHOT_KEY), _SNAPSHOT_KEY))}
        for name in old:
            db.execute(f"DROP TRIGGER IF EXISTS {quote_ident(name)}")
        seeded, rebuilt = [], []
        known_set = set(known)
        for table in tables:
            for stmt in trigger_sql(table):
                db.execute(stmt)
            lost = table.name in known_set and not set(trigger_names(table.name)) <= old
            first = snapshot and table.name not in marks
            if lost:
                rebuilt.append(table.name)
            if first or lost:
                db.execute(snapshot_sql(table))
                seeded.append(table.name)
            if table.name not in marks:  # seen by this journal: never snapshot again
                db.execute(f"INSERT OR REPLACE INTO {quote_ident(META_TABLE)} VALUES (?, '1')",
                           (_SNAPSHOT_KEY + table.name,))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return Installed(journal_id, tuple(seeded), tuple(rebuilt))
