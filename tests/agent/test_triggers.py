"""Triggers journal every change so that replaying the journal rebuilds the table.

The journal holds keys; the row images come from the table when a batch is built, so
``cap.journal()`` shows each change with the row as it is *now* (entries whose row is
gone are left out) and ``cap.ops()`` shows the raw journal."""

from __future__ import annotations

import json
import logging
import sqlite3
from typing import Any

import pytest

from edgesync.agent.capture._batcher import truncate_journal
from edgesync.agent.capture._triggers import quote_ident


def _encode(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$blob": value.hex().upper()}
    return value


def table_image(app: sqlite3.Connection, table: str, pk: list[str]) -> dict[str, dict[str, Any]]:
    cur = app.execute(f"SELECT * FROM {quote_ident(table)}")
    names = [d[0] for d in cur.description]
    out = {}
    for row in cur.fetchall():
        obj = {n: _encode(v) for n, v in zip(names, row, strict=True)}
        out[json.dumps({k: obj[k] for k in pk}, sort_keys=True)] = obj
    return out


def replay(journal: list[Any], table: str) -> dict[str, dict[str, Any]]:
    """Apply journal ops in commit order, as the cloud would (insert/update = upsert)."""
    mirror: dict[str, dict[str, Any]] = {}
    last = 0
    for seq, t, op, pk, row in journal:
        assert seq > last
        last = seq
        if t != table:
            continue
        key = json.dumps(pk, sort_keys=True)
        if op == "delete":
            assert row is None
            mirror.pop(key, None)
        else:
            assert {k: row[k] for k in pk} == pk
            mirror[key] = row
    return mirror


def test_insert_update_delete(app: sqlite3.Connection, capture: Any) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, v REAL)")
    cap = capture()
    app.execute("INSERT INTO t VALUES (1, 'a', 1.5), (2, 'b', NULL)")
    app.execute("UPDATE t SET name = 'c' WHERE id = 1")
    app.execute("DELETE FROM t WHERE id = 2")
    assert [op for _, _, op in cap.ops()] == ["insert", "insert", "update", "delete"]
    j = cap.journal()
    assert [(op, pk, row) for _, _, op, pk, row in j] == [
        ("insert", {"id": 1}, {"id": 1, "name": "c", "v": 1.5}),  # the row as it is now
        ("update", {"id": 1}, {"id": 1, "name": "c", "v": 1.5}),
        ("delete", {"id": 2}, None),  # the insert of 2 is left out: the row is gone
    ]
    assert replay(j, "t") == table_image(app, "t", ["id"])


def test_insert_or_replace_final_state(app: sqlite3.Connection, capture: Any) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
    cap = capture()
    app.execute("INSERT INTO t VALUES (1, 'a')")
    app.execute("INSERT OR REPLACE INTO t VALUES (1, 'b')")
    app.execute("REPLACE INTO t VALUES (2, 'c')")
    j = cap.journal()
    # Without recursive_triggers SQLite does not fire the delete trigger for the replaced
    # row: the replacement is journaled as an insert of the full new row.
    assert [(op, pk) for _, _, op, pk, _ in j] == [
        ("insert", {"id": 1}), ("insert", {"id": 1}), ("insert", {"id": 2})]
    assert replay(j, "t") == table_image(app, "t", ["id"]) == {
        '{"id": 1}': {"id": 1, "name": "b"}, '{"id": 2}': {"id": 2, "name": "c"}}


def test_insert_or_replace_with_recursive_triggers(app: sqlite3.Connection,
                                                   capture: Any) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
    cap = capture()
    app.execute("PRAGMA recursive_triggers = ON")
    app.execute("INSERT INTO t VALUES (1, 'a')")
    app.execute("INSERT OR REPLACE INTO t VALUES (1, 'b')")
    j = cap.journal()
    assert [op for _, _, op, _, _ in j] == ["insert", "delete", "insert"]
    assert replay(j, "t") == table_image(app, "t", ["id"])


def test_upsert_and_insert_or_ignore(app: sqlite3.Connection, capture: Any) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
    cap = capture()
    app.execute("INSERT INTO t VALUES (1, 1)")
    app.execute("INSERT INTO t VALUES (1, 5) ON CONFLICT (id) DO UPDATE SET n = n + excluded.n")
    app.execute("INSERT INTO t VALUES (2, 7) ON CONFLICT (id) DO UPDATE SET n = 0")
    before = len(cap.ops())
    app.execute("INSERT OR IGNORE INTO t VALUES (1, 100)")
    assert len(cap.ops()) == before  # an ignored insert journals nothing
    j = cap.journal()
    assert [(op, row) for _, _, op, _, row in j] == [
        ("insert", {"id": 1, "n": 6}), ("update", {"id": 1, "n": 6}),
        ("insert", {"id": 2, "n": 7})]
    assert replay(j, "t") == table_image(app, "t", ["id"])


def test_without_rowid_composite_pk_and_pk_update(app: sqlite3.Connection,
                                                  capture: Any) -> None:
    app.execute("CREATE TABLE s (site TEXT, n INTEGER, v, PRIMARY KEY (n, site)) WITHOUT ROWID")
    cap = capture()
    app.execute("INSERT INTO s VALUES ('x', 1, 'a'), ('y', 1, 'b')")
    app.execute("UPDATE s SET v = 'c' WHERE site = 'x'")
    app.execute("UPDATE s SET site = 'z' WHERE site = 'y'")  # primary key changes
    j = cap.journal()
    # pk objects follow the primary-key order (n, site), not the column order
    assert list(j[0][3]) == ["n", "site"]
    # the insert of (1, 'y') is left out: that key no longer exists
    assert [(op, pk) for _, _, op, pk, _ in j[1:]] == [
        ("update", {"n": 1, "site": "x"}),
        ("delete", {"n": 1, "site": "y"}),
        ("update", {"n": 1, "site": "z"}),
    ]
    assert replay(j, "s") == table_image(app, "s", ["n", "site"])


def test_pk_update_detects_case_and_type_changes(app: sqlite3.Connection,
                                                 capture: Any) -> None:
    app.execute("CREATE TABLE t (k TEXT COLLATE NOCASE PRIMARY KEY, v)")
    cap = capture()
    app.execute("INSERT INTO t VALUES ('a', 1)")
    app.execute("UPDATE t SET k = 'A'")  # equal under NOCASE, different for the cloud
    assert [op for _, _, op in cap.ops()] == ["insert", "delete", "update"]
    j = cap.journal()
    # the insert of 'a' must not pick up the row 'A' (equal under NOCASE): left out
    assert [(op, pk, row) for _, _, op, pk, row in j] == [
        ("delete", {"k": "a"}, None), ("update", {"k": "A"}, {"k": "A", "v": 1})]
    assert replay(j, "t") == table_image(app, "t", ["k"])


def test_blob_null_real_and_unicode_names(app: sqlite3.Connection, capture: Any) -> None:
    app.execute('CREATE TABLE "tëst tâble" (id INTEGER PRIMARY KEY, "naïve" TEXT, '
                '"we""ird" BLOB, r REAL)')
    cap = capture()
    app.execute('INSERT INTO "tëst tâble" VALUES (?, ?, ?, ?)', (1, "ça", b"\x00\xffA", 0.1))
    app.execute('INSERT INTO "tëst tâble" VALUES (2, NULL, NULL, NULL)')
    # a TEXT column holding a blob, and text that looks like the blob encoding. 1e300 is
    # bound, not written in the SQL: SQLite before 3.43 parses a literal through long
    # double, which on armhf is a double, and stores 1.0000000000000005e+300 there.
    app.execute('INSERT INTO "tëst tâble" VALUES (3, ?, ?, ?)',
                (b"\x01", '{"$blob":"00"}', 1e300))
    j = cap.journal()
    assert j[0][1] == "tëst tâble"
    assert j[0][4] == {"id": 1, "naïve": "ça", 'we"ird': {"$blob": "00FF41"}, "r": 0.1}
    assert j[1][4] == {"id": 2, "naïve": None, 'we"ird': None, "r": None}
    assert j[2][4] == {"id": 3, "naïve": {"$blob": "01"}, 'we"ird': '{"$blob":"00"}',
                       "r": 1e300}
    assert replay(j, "tëst tâble") == table_image(app, "tëst tâble", ["id"])


def test_real_values_keep_full_precision(app: sqlite3.Connection, capture: Any) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, r REAL)")
    cap = capture()
    values = [0.1 + 0.2, 1 / 3, 2.0, -1.5e-300, 123456789.123456789, 5e-324, 1e308]
    app.executemany("INSERT INTO t (r) VALUES (?)", [(v,) for v in values])
    app.executemany("INSERT INTO t (r) VALUES (?)", [(float("inf"),), (float("-inf"),)])
    got = [row["r"] for _, _, _, _, row in cap.journal()]
    assert got == [*values, None, None]  # JSON has no infinity


def test_blob_primary_key(app: sqlite3.Connection, capture: Any) -> None:
    app.execute("CREATE TABLE b (k BLOB PRIMARY KEY, v INTEGER)")
    cap = capture()
    app.execute("INSERT INTO b VALUES (x'cafe', 1)")
    assert [(op, pk, row) for _, _, op, pk, row in cap.journal()] == [
        ("insert", {"k": {"$blob": "CAFE"}}, {"k": {"$blob": "CAFE"}, "v": 1})]
    app.execute("DELETE FROM b")
    assert [(op, pk) for _, _, op, pk, _ in cap.journal()] == [
        ("delete", {"k": {"$blob": "CAFE"}})]


def test_delete_without_where_journals_every_row(app: sqlite3.Connection,
                                                 capture: Any) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    app.executemany("INSERT INTO t VALUES (?, 'x')", [(i,) for i in range(50)])
    cap = capture()
    app.execute("DELETE FROM t")
    j = cap.journal()
    assert len(j) == 50 and {op for _, _, op, _, _ in j} == {"delete"}


def test_tables_without_pk_are_refused_others_run(app: sqlite3.Connection, capture: Any,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    app.execute("CREATE TABLE rowid_only (a TEXT, b INTEGER)")
    app.execute("CREATE TABLE good (id INTEGER PRIMARY KEY, a TEXT)")
    app.execute("CREATE TABLE scratch (id INTEGER PRIMARY KEY)")
    app.execute("CREATE TABLE temps (id INTEGER PRIMARY KEY, ts TEXT)")
    with caplog.at_level(logging.WARNING, logger="edgesync.agent"):
        cap = capture({"scratch": {"strategy": "ignore"},
                       "temps": {"strategy": "telemetry", "ts_column": "ts"}})
    assert [t.name for t in cap.discovery.rows] == ["good"]
    assert [t.name for t in cap.discovery.telemetry] == ["temps"]  # read by cursor
    assert "no explicit PRIMARY KEY" in cap.discovery.skipped["rowid_only"]
    assert "rowid_only" in caplog.text and "PRIMARY KEY" in caplog.text
    # A time-series table without a key is the common case: the warning says how to
    # sync it as telemetry, not only how to silence it (issue 27).
    assert "table_strategies.rowid_only to {strategy: telemetry, ts_column:" in caplog.text
    for t in ("rowid_only", "good", "scratch", "temps"):
        app.execute(f"INSERT INTO {t} DEFAULT VALUES")
    assert [t for _, t, _, _, _ in cap.journal()] == ["good"]


def test_internal_and_virtual_tables_are_not_discovered(app: sqlite3.Connection,
                                                        capture: Any) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    app.execute("CREATE VIRTUAL TABLE docs USING fts5(body)")
    app.execute("CREATE TABLE __edgesync_private (id INTEGER PRIMARY KEY)")
    cap = capture()
    assert [t.name for t in cap.discovery.rows] == ["t"]


def test_application_connection_writes_after_install(app: sqlite3.Connection, source_db: Any,
                                                     capture: Any) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    capture().close()  # agent gone: only the triggers remain in the file
    other = sqlite3.connect(source_db)  # a fresh application connection, default settings
    with other:
        other.executemany("INSERT INTO t (v) VALUES (?)", [("x",), ("y",)])
    other.close()
    n = app.execute("SELECT count(*) FROM __edgesync_journal").fetchone()[0]
    assert n == 2


def test_reinstall_is_idempotent_and_commit_seq_never_reused(app: sqlite3.Connection,
                                                             capture: Any) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    cap = capture()
    app.execute("INSERT INTO t VALUES (1), (2)")
    assert truncate_journal(cap.db, "t", 2) == 1  # as a progress control would
    cap2 = capture()  # reinstall
    assert cap2.journal_id == cap.journal_id
    app.execute("INSERT INTO t VALUES (3)")
    assert [s for s, _, _ in cap2.ops()] == [2, 3]  # the highest row stays, 3 is new
    assert truncate_journal(cap.db, "t", 3) == 1
    app.execute("INSERT INTO t VALUES (4)")
    assert [s for s, _, _ in cap2.ops()] == [3, 4]
    names = {r[0] for r in app.execute(
        "SELECT name FROM sqlite_schema WHERE type = 'trigger'")}
    assert names == {"__edgesync_t_ins", "__edgesync_t_upd", "__edgesync_t_del"}


def test_ignored_table_loses_its_old_triggers(app: sqlite3.Connection, capture: Any) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    capture()
    capture({"t": {"strategy": "ignore"}})
    assert app.execute("SELECT count(*) FROM sqlite_schema WHERE type = 'trigger'"
                       ).fetchone()[0] == 0


def test_wide_table(app: sqlite3.Connection, capture: Any) -> None:
    cols = ", ".join(f"c{i} INTEGER" for i in range(100))
    app.execute(f"CREATE TABLE w (id INTEGER PRIMARY KEY, {cols})")
    cap = capture()
    app.execute("INSERT INTO w (id, c0, c99) VALUES (1, 5, x'ab')")
    row = cap.journal()[0][4]
    assert len(row) == 101 and row["c0"] == 5 and row["c99"] == {"$blob": "AB"}
    assert row["c50"] is None
