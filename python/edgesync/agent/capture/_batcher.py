"""Journal rows → ``sync/rows/batch`` payloads.

Rows are read per table in ``commit_seq`` order after the table's publish cursor and
cut into batches of at most 4,096 rows and 512 KiB of JSON. The journal holds keys
only: one SQL statement per batch joins each journal row to the live table row and
returns the plain column values (no SQL expression per value: SQLite's type dispatch in
SQL was the bottleneck). ``_core.JournalReader`` (Rust) runs it on a read-only
connection of its own and writes each row's ``{"commit_seq":…,"op":…,"pk":…,"row":…}``
text straight from the column values, without a Python object per value; the text is
spliced into the payload without being parsed in Python. That connection goes through
the very SQLite library Python's ``sqlite3`` loaded (two copies of SQLite in one
process do not see each other's POSIX locks, see docs/agent.md "Performance"); where
that library cannot be reached, the rows are fetched by ``sqlite3`` and written by
``_core.RowEncoder`` instead, with the same bytes as result. An ``insert``/``update``
whose row is gone by then (deleted, or replaced under another key) is left out: a
later journal row of that key (the delete or the new insert) carries its final state.

Before a batch is handed out its journal range is recorded as *pending* in
``state.db``; until it is confirmed, asking again rebuilds the batch of that range
under the same ``batch_id``, also after a crash and restart. (The rows are read
again, so a row changed in between is sent in its newer state: harmless, the change
that made it newer is journaled after it and will follow.)
"""

from __future__ import annotations

import importlib
import logging
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import orjson

from edgesync import _core
from edgesync._core import (
    MAX_BATCH_BYTES,
    MAX_BATCH_ROWS,
    ROW_CAPTURE_STRATEGY,
    SUPPORTED_FORMAT_VERSION,
)
from edgesync.agent._state import PendingBatch, StateStore, TableState
from edgesync.agent.capture._discovery import Column, TableInfo
from edgesync.agent.capture._triggers import JOURNAL_TABLE, META_TABLE, key_column, quote_ident
from edgesync.errors import OversizedRowError
from edgesync.protocol import uuid7

__all__ = [
    "Batch",
    "Batcher",
    "JournalQuery",
    "JournalRow",
    "encode_batch",
    "journal_query",
    "journal_select_sql",
    "open_reader",
    "read_journal",
    "truncate_journal",
]

log = logging.getLogger("edgesync.agent")

_J = quote_ident(JOURNAL_TABLE)
_M = quote_ident(META_TABLE)
# __edgesync_meta key: a confirmed journal row kept only because it was the top.
_KEPT_TOP = "confirmed_top"


# (commit_seq, encoded): the batch row's JSON, None when the row is gone. A Rust class:
# a page of 4,096 of them is built in one call.
JournalRow = _core.JournalRow


@dataclass(frozen=True, slots=True)
class Batch:
    pending: PendingBatch
    payload: bytes
    row_count: int


@dataclass(frozen=True, slots=True)
class JournalQuery:
    """The SELECT of a table's journal rows and the encoder of what it returns."""

    sql: str  # parameters: table name, after, upto, limit
    encoder: _core.RowEncoder


def _never_null(table: TableInfo, c: Column) -> bool:
    """Whether a primary-key column can hold no NULL (so NULL there means no row)."""
    rowid_alias = len(table.pk_columns) == 1 and c.decl_type.strip().upper() == "INTEGER"
    return c.not_null or rowid_alias


def journal_query(table: TableInfo) -> JournalQuery:
    """Columns: commit_seq, op, k0..kP-1, the table's columns (NULL when the row is
    gone or the op is a delete), then a "row exists" flag only for tables whose key
    may be NULL (SQLite allows NULL in a non-INTEGER PRIMARY KEY of a rowid table)."""
    pk = table.pk_columns
    t = quote_ident(table.name)

    def match(alias: str) -> str:
        # `IS` finds the row through the primary key index; the BINARY repeat keeps a
        # NOCASE key from matching a row whose key differs in case.
        return " AND ".join(
            f"{alias}.{quote_ident(c.name)} IS __j.{key_column(i)} AND "
            f"{alias}.{quote_ident(c.name)} IS __j.{key_column(i)} COLLATE BINARY"
            for i, c in enumerate(pk))

    names = [c.name for c in table.columns]
    select = ["__j.commit_seq", "__j.op", *(f"__j.{key_column(i)}" for i in range(len(pk))),
              *(f"__t.{quote_ident(n)}" for n in names)]
    sure = [c for c in pk if _never_null(table, c)]
    if sure:
        live = 2 + len(pk) + names.index(sure[0].name)
    else:
        ref = f"__t.{quote_ident(pk[0].name)}"
        select.append(f"CASE WHEN {ref} IS NOT NULL THEN 1 WHEN __j.op = 'delete' THEN NULL "
                      f"ELSE (SELECT 1 FROM {t} AS __e WHERE {match('__e')}) END")
        live = len(select) - 1
    sql = (f"SELECT {', '.join(select)} FROM {_J} AS __j LEFT JOIN {t} AS __t "
           f"ON __j.op != 'delete' AND {match('__t')} "
           f"WHERE __j.table_name = ? AND __j.commit_seq > ? AND __j.commit_seq <= ? "
           f"ORDER BY __j.commit_seq LIMIT ?")
    return JournalQuery(sql, _core.RowEncoder([c.name for c in pk], names, live))


def journal_select_sql(table: TableInfo) -> str:
    """Parameters: table name, after, upto, limit (see ``journal_query``)."""
    return journal_query(table).sql


def _lossy_text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _sqlite_library() -> str | None:
    """The file of the module through which Python's ``sqlite3`` calls SQLite (None
    when it is built into the interpreter: its symbols are then the program's)."""
    return getattr(importlib.import_module("_sqlite3"), "__file__", None)


_fallback_logged = False


def open_reader(db: sqlite3.Connection) -> _core.JournalReader | None:
    """A Rust reader of the database file of ``db`` (same busy timeout), or None when
    there is none to be had (an in-memory database; a SQLite that Rust cannot reach,
    logged once): ``read_journal`` then fetches through ``db``."""
    global _fallback_logged
    path = next((str(r[2]) for r in db.execute("PRAGMA database_list") if r[1] == "main"), "")
    if not path:
        return None
    timeout = int(db.execute("PRAGMA busy_timeout").fetchone()[0])
    try:
        return _core.JournalReader(_sqlite_library(), path, timeout)
    except sqlite3.Error as exc:
        if not _fallback_logged:
            _fallback_logged = True
            log.warning("journal rows are read through Python's sqlite3 (slower): the "
                        "SQLite library it uses cannot be used from Rust: %s", exc)
        return None


def read_journal(db: sqlite3.Connection, table: TableInfo, *, after: int,
                 upto: int | None = None, limit: int = MAX_BATCH_ROWS,
                 query: JournalQuery | None = None,
                 reader: _core.JournalReader | None = None) -> list[JournalRow]:
    """Journal rows of ``table`` with ``after < commit_seq <= upto``, oldest first;
    read by ``reader`` (from ``open_reader(db)``) when given."""
    q = query or journal_query(table)
    args = (table.name, after, upto if upto is not None else (1 << 63) - 1, limit)
    # The reader's connection sees committed rows only: not while db has a transaction
    # open, whose own changes it would miss (the agent reads outside transactions).
    if reader is not None and not db.in_transaction:
        return reader.read(q.sql, q.encoder, *args)
    try:
        rows = db.execute(q.sql, args).fetchall()
    except sqlite3.OperationalError as e:
        if "decode" not in str(e):
            raise
        # TEXT that is not UTF-8 (SQLite stores what it is given): sent with U+FFFD in
        # place of the bad bytes rather than hold the table's publishing for good.
        factory = db.text_factory
        db.text_factory = _lossy_text
        try:
            rows = db.execute(q.sql, args).fetchall()
        finally:
            db.text_factory = factory
    return q.encoder.encode_rows(rows)


_TRUNCATE_CHUNK = 5000  # rows per write transaction: the application waits on each


def truncate_journal(db: sqlite3.Connection, table: str, upto: int, *,
                     from_seq: int = 0) -> int:
    """Delete journal rows of ``table`` with ``from_seq <= commit_seq <= upto``; returns
    how many. Several short transactions, so the application never waits long.

    The journal's highest row always stays: new commit_seq values are max + 1, so
    keeping it is what stops a value from being used twice. A confirmed row kept only
    for that reason is remembered in the journal's meta table and deleted by a later
    call once a newer row exists (otherwise it would stay in the journal for good).
    """
    kept = _drop_kept_top(db)
    total = int(kept is not None and kept[0] == table and from_seq <= kept[1] <= upto)
    while True:
        db.execute("BEGIN IMMEDIATE")
        try:
            n = db.execute(
                f"DELETE FROM {_J} WHERE commit_seq IN (SELECT commit_seq FROM {_J} "
                f"WHERE table_name = ? AND commit_seq >= ? AND commit_seq <= ? "
                f"AND commit_seq < (SELECT max(commit_seq) FROM {_J}) "
                f"ORDER BY commit_seq LIMIT {_TRUNCATE_CHUNK})",
                (table, from_seq, upto)).rowcount
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        total += n
        if n < _TRUNCATE_CHUNK:
            break
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(
            f"INSERT OR REPLACE INTO {_M} SELECT ?, commit_seq FROM {_J} WHERE commit_seq = "
            f"(SELECT max(commit_seq) FROM {_J}) AND table_name = ? AND commit_seq >= ? "
            "AND commit_seq <= ?", (_KEPT_TOP, table, from_seq, upto))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return total


def _drop_kept_top(db: sqlite3.Connection) -> tuple[str, int] | None:
    """Delete the confirmed row ``truncate_journal`` kept as the journal's top, once it
    is no longer the top; returns its (table, commit_seq) when it was deleted."""
    db.execute("BEGIN IMMEDIATE")
    try:
        kept = db.execute(f"SELECT j.table_name, j.commit_seq FROM {_J} j JOIN {_M} m ON "
                          "m.key = ? AND j.commit_seq = CAST(m.value AS INTEGER)",
                          (_KEPT_TOP,)).fetchone()
        gone = kept is not None and db.execute(
            f"DELETE FROM {_J} WHERE commit_seq = ? AND commit_seq < "
            f"(SELECT max(commit_seq) FROM {_J})", (kept[1],)).rowcount > 0
        if kept is None or gone:
            db.execute(f"DELETE FROM {_M} WHERE key = ?", (_KEPT_TOP,))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return (str(kept[0]), int(kept[1])) if gone and kept is not None else None


def _prefix(p: PendingBatch) -> bytes:
    head = orjson.dumps({
        "format_version": SUPPORTED_FORMAT_VERSION,
        "capture_strategy": ROW_CAPTURE_STRATEGY,
        "batch_id": p.batch_id,
        "journal_epoch": p.journal_epoch,
        "source_table": p.source_table,
        "schema_hash": p.schema_hash,
    })[:-1]
    if p.first_seen_at_ms is not None:
        head += b',"first_seen_at_ms":%d' % p.first_seen_at_ms
    if p.schema_columns_json is not None:
        head += b',"schema_columns":' + p.schema_columns_json.encode()
    return head


def _frame(first: int, last: int) -> tuple[bytes, bytes]:
    return b',"first_commit_seq":%d,"last_commit_seq":%d,"rows":[' % (first, last), b"]}"


def encode_batch(p: PendingBatch, rows: Sequence[JournalRow]) -> bytes:
    """The JSON payload of ``p`` carrying ``rows`` (first/last taken from the rows)."""
    live = [r for r in rows if r.encoded is not None]
    enc = [r.encoded for r in live if r.encoded is not None]
    return _assemble(p, live[0].commit_seq, live[-1].commit_seq, enc)


def _assemble(p: PendingBatch, first: int, last: int, encoded: Sequence[bytes]) -> bytes:
    mid, end = _frame(first, last)
    return b"".join((_prefix(p), mid, b",".join(encoded), end))


def _fit(prefix_len: int, rows: Sequence[JournalRow], table: str) -> int:
    """How many leading ``rows`` (all live) fit in one batch (at least one, or
    OversizedRowError)."""
    first = rows[0].commit_seq
    body = 0
    count = 0
    for r in rows[:MAX_BATCH_ROWS]:
        assert r.encoded is not None
        size = len(r.encoded)
        mid, end = _frame(first, r.commit_seq)
        total = prefix_len + len(mid) + body + (1 if count else 0) + size + len(end)
        if total > MAX_BATCH_BYTES:
            if count == 0:
                raise OversizedRowError(table, r.commit_seq, total, MAX_BATCH_BYTES)
            break
        body += size + (1 if count else 0)
        count += 1
    return count


class Batcher:
    """Builds the next batch of a table from the journal, persisting it as pending."""

    def __init__(self, source: sqlite3.Connection, state: StateStore, *,
                 forget: Callable[[str, int, int], object] | None = None,
                 lkcv: Callable[[TableInfo, list[bytes]], list[bytes]] | None = None,
                 reserved: Callable[[str, str], list[tuple[int, int]]] | None = None,
                 first_seen: Callable[[int], int | None] | None = None) -> None:
        self._db = source
        # commit_seq -> Unix ms the agent first saw it (``first_seen_at_ms``), see
        # _freshness; None sends no stamp.
        self._first_seen = first_seen or (lambda seq: None)
        self._state = state
        self._reader = open_reader(source)
        # Journal ranges that travel by upload instead (table, epoch) -> [(first, last)].
        self._reserved = reserved
        # Adds "lkcv" to rows whose key the cloud wrote (state_write), see _writeback.
        self._lkcv = lkcv
        self._tables: dict[str, tuple[TableInfo, JournalQuery]] = {}
        # Deletes journal rows that carry nothing (their table row is gone: a later
        # journal row of the key carries its final state); (table, first, last).
        self._forget = forget or (lambda t, first, last: truncate_journal(
            self._db, t, last, from_seq=first))

    def close(self) -> None:
        """Closes the reader's connection (the source connection is the caller's)."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def set_tables(self, tables: Sequence[TableInfo]) -> None:
        """The rows tables as they are now (their columns shape the row JSON)."""
        self._tables = {t.name: (t, journal_query(t)) for t in tables}

    def journal_high_water(self) -> int:
        row = self._db.execute(f"SELECT max(commit_seq) FROM {_J}").fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def _read(self, table: str, after: int, upto: int | None) -> list[JournalRow]:
        info, query = self._tables[table]
        # One read transaction: journal rows and the table rows they join are one snapshot.
        rows = read_journal(self._db, info, after=after, upto=upto, query=query,
                            reader=self._reader)
        if self._lkcv is None:
            return rows
        live = [r for r in rows if r.encoded is not None]
        marked = iter(self._lkcv(info, [r.encoded for r in live if r.encoded is not None]))
        return [JournalRow(r.commit_seq, next(marked)) if r.encoded is not None else r
                for r in rows]

    def read_range(self, info: TableInfo, first: int, last: int
                   ) -> Iterator[list[JournalRow]]:
        """Pages of journal rows of ``info`` with ``first <= commit_seq <= last``."""
        after = first - 1
        while after < last:
            page = self._read(info.name, after, last)
            if not page:
                return
            yield page
            after = page[-1].commit_seq

    def _skip_reserved(self, ts: TableState, upto: int | None) -> tuple[bool, int | None]:
        """(whether the cursor jumped over a reserved range, the read limit)."""
        if self._reserved is None:
            return False, upto
        cursor = ts.last_published_commit_seq
        for first, last in sorted(self._reserved(ts.source_table, ts.journal_epoch)):
            if first <= cursor + 1 <= last:
                self._state.advance_cursor(ts.source_table, ts.journal_epoch, last)
                return True, upto
            if first > cursor + 1:
                return False, first - 1 if upto is None else min(upto, first - 1)
        return False, upto

    def table_info(self, table: str) -> TableInfo | None:
        got = self._tables.get(table)
        return got[0] if got is not None else None

    def next_batch(self, table: str, *, upto: int | None = None) -> Batch | None:
        """The pending batch of ``table`` if there is one, else a new one of the rows
        after its cursor (``<= upto`` when given); None when nothing is to be sent."""
        if table not in self._tables:
            return None
        ts: TableState | None = self._state.table(table)
        if ts is None or ts.paused or ts.schema_hash is None:
            return None
        pending = self._state.pending(table)
        if pending is not None:
            pending = replace(pending,
                              first_seen_at_ms=self._first_seen(pending.first_commit_seq))
            rows = [r for r in self._read(table, pending.first_commit_seq - 1,
                                          pending.last_commit_seq) if r.encoded is not None]
            if rows:
                return Batch(pending, encode_batch(pending, rows), len(rows))
            # Its rows were deleted by a progress control (the cloud has them), or
            # every row is gone from the table (later journal rows carry that).
            self._state.confirm(pending)
            self._forget(table, pending.first_commit_seq, pending.last_commit_seq)
            ts = self._state.table(table)
            assert ts is not None
        while True:
            jumped, limit = self._skip_reserved(ts, upto)
            if jumped:
                ts = self._state.table(table)
                assert ts is not None
                continue
            scanned = self._read(table, ts.last_published_commit_seq, limit)
            if not scanned and limit is not None and limit != upto:
                # nothing of this table before a reserved range: move up to it
                self._state.advance_cursor(table, ts.journal_epoch, limit)
                ts = self._state.table(table)
                assert ts is not None
                continue
            if not scanned:
                return None
            rows = [r for r in scanned if r.encoded is not None]
            assert ts.schema_hash is not None
            probe = PendingBatch(table, uuid7(), ts.journal_epoch, scanned[0].commit_seq,
                                 scanned[-1].commit_seq, ts.schema_hash,
                                 None if ts.schema_sent else ts.schema_json,
                                 self._first_seen(scanned[0].commit_seq))
            if not rows:  # every row of this stretch is gone: skip past it
                self._state.save_pending(probe)
                self._state.confirm(probe)
                self._forget(table, probe.first_commit_seq, probe.last_commit_seq)
                ts = self._state.table(table)
                assert ts is not None
                continue
            assert ts.schema_hash is not None
            n = _fit(len(_prefix(probe)), rows, table)
            last = scanned[-1].commit_seq if n == len(rows) else rows[n - 1].commit_seq
            pending = PendingBatch(table, probe.batch_id, probe.journal_epoch,
                                   scanned[0].commit_seq, last, probe.schema_hash,
                                   probe.schema_columns_json, probe.first_seen_at_ms)
            self._state.save_pending(pending)
            payload = _assemble(pending, rows[0].commit_seq, rows[n - 1].commit_seq,
                                [r.encoded for r in rows[:n] if r.encoded is not None])
            return Batch(pending, payload, n)
