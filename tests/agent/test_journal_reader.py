"""``_core.JournalReader``: journal pages read by Rust through the SQLite library of
Python's ``sqlite3``, byte-identical to the fetch-and-encode path it replaces."""

from __future__ import annotations

import ctypes.util
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from edgesync import _core
from edgesync.agent.capture import _batcher
from edgesync.agent.capture._batcher import JournalRow, journal_query, open_reader, read_journal
from edgesync.agent.capture._discovery import TableInfo

BIG = 1 << 30


@contextmanager
def _open(db: sqlite3.Connection) -> Iterator[_core.JournalReader]:
    reader = open_reader(db)
    assert reader is not None, "the Rust reader must be available on this Python"
    try:
        yield reader
    finally:
        reader.close()


def _pairs(rows: list[JournalRow]) -> list[tuple[int, bytes | None]]:
    return [(r.commit_seq, r.encoded) for r in rows]


def _both(cap: Any, reader: _core.JournalReader, table: TableInfo, **kw: Any
          ) -> list[tuple[int, bytes | None]]:
    """The rows read both ways; asserts they are the same bytes."""
    q = journal_query(table)
    python = _pairs(read_journal(cap.db, table, query=q, **kw))
    rust = _pairs(read_journal(cap.db, table, query=q, reader=reader, **kw))
    assert rust == python
    return rust


def _table(cap: Any, name: str) -> TableInfo:
    [info] = [t for t in cap.discovery.rows if t.name == name]
    return info


INVALID_UTF8 = [b"\xff", b"a\xffb", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82(",
                b"\xed\xa0\x80", b"\xf0\x80\x80", b"\xf4\x90\x80\x80", b"\xf0\x9f\x98",
                b"\xc0\xaf", b"\xf8\x88\x80\x80\x80", b"ok\x80\x80\x80done", b"\xfe\xff"]


def test_every_value_kind_is_byte_identical(app: sqlite3.Connection, capture: Any) -> None:
    app.execute("CREATE TABLE kinds (id INTEGER PRIMARY KEY, t TEXT, r REAL, i INTEGER, "
                "b BLOB, n NUMERIC, x, \"odd \"\"name\"\"\" TEXT NOT NULL DEFAULT 'd')")
    cap = capture()
    texts = ["", "plain", "quote \" backslash \\ slash /", "\n\r\t\b\f\x00\x01\x1f\x7f",
             "grüße ☃ 😀", "\u2028\u2029", "x" * 5000]
    reals = [0.0, -0.0, 0.1, 1 / 3, 3.0, 1e20, 1e-7, 5e-324, 1.7976931348623157e308,
             2.0 ** 53 + 2, -123456789.125, float("inf"), float("-inf")]
    ints = [0, -1, 1, 2 ** 31, -(2 ** 63), 2 ** 63 - 1]
    blobs = [b"", b"\x00", bytes(range(256))]
    values: list[object] = [None, *texts, *reals, *ints, *blobs]
    for k, v in enumerate(values):
        # every column gets every kind (columns without affinity keep it as given)
        app.execute("INSERT INTO kinds (t, r, i, b, n, x) VALUES (?, ?, ?, ?, ?, ?)",
                    (v, v, v, v, v, v))
        app.execute(f"UPDATE kinds SET x = ? WHERE id = {k + 1}", (v,))
    for raw in INVALID_UTF8:
        app.execute("INSERT INTO kinds (t, x) VALUES (CAST(? AS TEXT), CAST(? AS TEXT))",
                    (raw, raw))
    app.execute("DELETE FROM kinds WHERE id % 7 = 3")
    with _open(cap.db) as reader:
        rows = _both(cap, reader, _table(cap, "kinds"), after=0, limit=BIG)
        assert len(rows) == len(cap.ops())
        assert any(e is None for _, e in rows)  # rows deleted since journaling
        assert any(e is not None and "\ufffd".encode() in e for _, e in rows)
        # pages, bounds and limits as the batcher uses them
        for after, upto, limit in [(0, None, 5), (10, 20, 4096), (3, 3, 10), (0, 0, 9),
                                   (40, None, 1), (0, None, 0)]:
            _both(cap, reader, _table(cap, "kinds"), after=after, upto=upto, limit=limit)


def test_lossy_text_matches_python_decode(tmp_path: Path) -> None:
    """Rust's U+FFFD substitution is Python's ``decode("utf-8", "replace")``."""
    path = tmp_path / "t.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE j (seq INTEGER PRIMARY KEY, tn, op, k0)")
    samples = [*INVALID_UTF8, bytes(range(128, 256)), b"\xe0\x80\xaf\xed\xbf\xbf\xee\x80"]
    db.executemany("INSERT INTO j (tn, op, k0) VALUES ('t', 'delete', CAST(? AS TEXT))",
                   [(s,) for s in samples])
    enc = _core.RowEncoder(["k"], [], 2)
    sql = ("SELECT seq, op, k0 FROM j WHERE tn = ? AND seq > ? AND seq <= ? "
           "ORDER BY seq LIMIT ?")
    with _open(db) as reader:
        got = reader.read(sql, enc, "t", 0, BIG, BIG)
    want = [s.decode("utf-8", "replace") for s in samples]
    assert [_core_pk(r) for r in got] == want
    db.close()


def _core_pk(r: JournalRow) -> str:
    assert r.encoded is not None
    pk: str = json.loads(r.encoded)["pk"]["k"]
    return pk


def test_keys_composite_without_rowid_nullable_and_pk_updates(app: sqlite3.Connection,
                                                              capture: Any) -> None:
    app.execute("CREATE TABLE comp (a TEXT, b INTEGER, v, PRIMARY KEY (a, b)) WITHOUT ROWID")
    app.execute("CREATE TABLE nullable (k TEXT PRIMARY KEY, v INTEGER)")
    app.execute("CREATE TABLE nocase (k TEXT PRIMARY KEY COLLATE NOCASE, v)")
    app.execute("CREATE TABLE rowid (id INTEGER PRIMARY KEY, v)")
    cap = capture()
    app.executemany("INSERT INTO comp VALUES (?, ?, ?)",
                    [("x", i, f"v{i}") for i in range(5)] + [("", -1, None)])
    app.execute("UPDATE comp SET b = b + 100 WHERE b IN (1, 2)")  # key changes
    app.execute("UPDATE comp SET a = 'y' WHERE b = 3")
    app.execute("UPDATE comp SET v = 'changed' WHERE b = 4")
    app.execute("DELETE FROM comp WHERE b = 0")
    app.execute("INSERT INTO nullable VALUES (NULL, 1)")
    app.execute("INSERT INTO nullable VALUES (NULL, 2)")  # NULLs are distinct keys
    app.executemany("INSERT INTO nullable VALUES (?, ?)", [("a", 3), ("gone", 4)])
    app.execute("DELETE FROM nullable WHERE k = 'gone'")
    app.execute("UPDATE nullable SET k = 'b' WHERE k = 'a'")
    app.execute("UPDATE nullable SET k = NULL WHERE k = 'b'")
    app.execute("INSERT INTO nocase VALUES ('Abc', 1)")
    app.execute("UPDATE nocase SET k = 'ABC'")  # same key to NOCASE, not to BINARY
    app.execute("INSERT INTO rowid VALUES (1, 'a'), (2, 'b')")
    app.execute("UPDATE rowid SET id = 10 WHERE id = 1")
    app.execute("DELETE FROM rowid WHERE id = 2")
    app.execute("INSERT INTO rowid VALUES (2, 'again')")
    with _open(cap.db) as reader:
        for name in ("comp", "nullable", "nocase", "rowid"):
            rows = _both(cap, reader, _table(cap, name), after=0, limit=BIG)
            assert any(e is None for _, e in rows) or name == "nocase", name
            assert any(e is not None and b'"op":"delete"' in e for _, e in rows) \
                or name == "nocase"


def test_batcher_uses_the_reader_and_builds_the_same_batches(app: sqlite3.Connection,
                                                             capture: Any) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    app.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"v{i}") for i in range(5000)])
    cap = capture(snapshot=True)
    assert cap.batcher._reader is not None
    major, minor, patch = sqlite3.sqlite_version_info  # the library Python's sqlite3 uses
    assert cap.batcher._reader.sqlite_version_number == major * 1_000_000 + minor * 1000 + patch
    batch = cap.batcher.next_batch("t")
    assert batch is not None and batch.row_count == 4096
    # the pending batch, built again by the Python path, is the same payload
    reader, cap.batcher._reader = cap.batcher._reader, None
    again = cap.batcher.next_batch("t")
    assert again is not None and again.payload == batch.payload
    cap.batcher._reader = reader
    cap.state.confirm(batch.pending)
    rest = cap.batcher.next_batch("t")
    assert rest is not None and rest.row_count == 5000 - 4096
    cap.batcher.close()
    cap.batcher.close()  # twice is fine
    with pytest.raises(ValueError, match="closed"):
        reader.read("SELECT 1", journal_query(_table(cap, "t")).encoder, "t", 0, 1, 1)


def test_fallback_when_sqlite_cannot_be_reached(app: sqlite3.Connection, capture: Any,
                                                monkeypatch: pytest.MonkeyPatch,
                                                caplog: pytest.LogCaptureFixture) -> None:
    libm = ctypes.util.find_library("m")
    assert libm is not None
    monkeypatch.setattr(_batcher, "_sqlite_library", lambda: libm)
    monkeypatch.setattr(_batcher, "_fallback_logged", False)
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, s TEXT)")
    with caplog.at_level(logging.WARNING, logger="edgesync.agent"):
        cap = capture()
        assert cap.batcher._reader is None
        assert open_reader(cap.db) is None
    warnings = [r for r in caplog.records if "read through Python's sqlite3" in r.message]
    assert len(warnings) == 1 and "sqlite3_" in warnings[0].message  # logged once
    app.execute("INSERT INTO t VALUES (1, CAST(x'61ff62' AS TEXT))")
    app.execute("INSERT INTO t VALUES (2, 'ok')")
    batch = cap.batcher.next_batch("t")
    assert batch is not None and batch.row_count == 2
    assert "a\ufffdb".encode() in batch.payload
    # nothing to share with an in-memory database: no reader, no warning
    assert open_reader(sqlite3.connect(":memory:")) is None


def test_reader_does_not_wait_for_a_writer_and_sees_commits(app: sqlite3.Connection,
                                                             capture: Any) -> None:
    """WAL: a write transaction held by another connection does not block the reader,
    which reads the last committed state (the uncommitted rows come with the commit)."""
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    cap = capture()
    info = _table(cap, "t")
    app.execute("INSERT INTO t VALUES (1, 'committed')")
    app.execute("BEGIN IMMEDIATE")
    app.execute("INSERT INTO t VALUES (2, 'not yet')")
    app.execute("UPDATE t SET v = 'changed, not yet' WHERE id = 1")
    try:
        with _open(cap.db) as reader:
            start = time.monotonic()
            rows = _both(cap, reader, info, after=0, limit=BIG)
            assert time.monotonic() - start < 1
            assert [s for s, _ in rows] == [1]
            assert rows[0][1] is not None and b'"committed"' in rows[0][1]
            app.execute("COMMIT")
            rows = _both(cap, reader, info, after=0, limit=BIG)
            assert len(rows) == 3 and all(b"not yet" in (e or b"") for _, e in rows)
    finally:
        if app.in_transaction:
            app.execute("ROLLBACK")


def test_reads_inside_own_transaction_see_its_changes(app: sqlite3.Connection,
                                                      capture: Any) -> None:
    """The Rust connection sees committed rows only: inside a transaction of the
    agent's own connection, read_journal fetches through that connection instead."""
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    cap = capture()
    info = _table(cap, "t")
    with _open(cap.db) as reader:
        cap.db.execute("BEGIN IMMEDIATE")
        try:
            cap.db.execute("INSERT INTO t VALUES (1, 'mine')")
            rows = read_journal(cap.db, info, after=0, reader=reader)
            assert [r.commit_seq for r in rows] == [1]
        finally:
            cap.db.execute("ROLLBACK")


def test_reads_run_without_the_gil_and_errors_are_sqlite_errors(
        app: sqlite3.Connection, capture: Any) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    app.executemany("INSERT INTO t VALUES (?, ?)", [(i, "v" * 50) for i in range(20000)])
    cap = capture(snapshot=True)
    info = _table(cap, "t")
    q = journal_query(info)
    with _open(cap.db) as reader:
        results: list[int] = []

        def read() -> None:
            results.append(len(reader.read(q.sql, q.encoder, "t", 0, BIG, BIG)))

        threads = [threading.Thread(target=read) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == [20000] * 4
        with pytest.raises(sqlite3.OperationalError, match="no such column") as exc:
            reader.read("SELECT nope FROM t", q.encoder, "t", 0, 1, 1)
        assert getattr(exc.value, "sqlite_errorcode", None) == 1
        with pytest.raises(sqlite3.OperationalError, match="needs"):
            reader.read("SELECT ?, ?, ?, ?", q.encoder, "t", 0, 1, 1)
    with pytest.raises(sqlite3.OperationalError, match="unable to open"):
        _core.JournalReader(_batcher._sqlite_library(),
                            cap.replication.source_db_path.with_name("none.db"), 10)
