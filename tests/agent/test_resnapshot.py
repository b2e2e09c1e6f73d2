"""The device side of re-snapshot and verification without MQTT: the filter becomes a
WHERE of quoted identifiers and bound values, chunks are journaled and reserved for
uploads, a job resumes from its cursor after a restart, hash buckets select exactly
their keys, and the digest is the one the cloud computes over the same values."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from edgesync import _core
from edgesync.agent.jobs._resnapshot import Resnapshots, where_sql
from edgesync.agent.jobs._uploads import Uploads
from edgesync.agent.jobs._verify import table_digest
from edgesync.errors import InvalidRequestError
from edgesync.protocol import TableDigest, parse_filter, pk_json


def _setup(app: sqlite3.Connection, n: int) -> None:
    app.execute('CREATE TABLE "we""ird" (site TEXT, id INTEGER, v TEXT, m NUMERIC, '
                "b BLOB, PRIMARY KEY (site, id))")
    app.executemany('INSERT INTO "we""ird" VALUES (?, ?, ?, ?, ?)',
                    [("a" if i % 2 else "b", i, f"v{i}", i * 1.5 if i % 3 else i,
                      bytes([i % 256])) for i in range(1, n + 1)])


def _info(cap: Any) -> Any:
    [info] = cap.discovery.rows
    return info


def test_where_sql_quotes_names_and_binds_values(app: sqlite3.Connection, capture: Any) -> None:
    _setup(app, 3)
    info = _info(capture())
    flt = parse_filter({"where": [{"column": "v", "op": "in", "value": ["x'; DROP", "y"]},
                                  {"column": "b", "op": "eq", "value": {"$blob": "0a"}},
                                  {"column": "m", "op": "is_null"}],
                        "key_range": {"from": {"site": "a", "id": 2}}})
    sql, args = where_sql(flt, info, ["b", 9])
    assert sql == ('"v" IN (?, ?) AND "b" = ? AND "m" IS NULL AND ("site", "id") >= (?, ?) '
                   'AND ("site", "id") > (?, ?)')
    assert args == ["x'; DROP", "y", b"\n", "a", 2, "b", 9]
    for bad in ({"where": [{"column": "nope", "op": "eq", "value": 1}]},
                {"key_range": {"from": {"id": 1}}}):
        with pytest.raises(InvalidRequestError):
            where_sql(parse_filter(bad), info)


def _journaled(db: sqlite3.Connection) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in db.execute(
        "SELECT k0, k1 FROM __edgesync_journal WHERE op = 'insert' ORDER BY commit_seq")]


def test_chunks_reserve_uploads_and_resume_after_a_restart(
        app: sqlite3.Connection, capture: Any, tmp_path: Path) -> None:
    _setup(app, 25)
    cap = capture()
    info = _info(cap)
    uploads = Uploads(cap.db, cap.state, tmp_path / "spool")
    jobs = Resnapshots(cap.db, cap.state, uploads, chunk_rows=10, max_open=1)
    doc = {"control_id": "c1", "source_table": info.name, "job_id": "j1",
           "filter": {"where": [{"column": "id", "op": "ne", "value": 4}]}}
    jobs.requested(doc, info)
    jobs.requested(doc, info)  # executed twice: one job
    jobs.step(lambda _: info)
    # key order: ("a", 1), ("a", 3) … ("a", 25), then ("b", 2) …; ("b", 4) is left out
    assert len(_journaled(cap.db)) == 10 and len(uploads.all()) == 1
    [(job_id, report)] = jobs.reports()
    assert b'"status":"running"' in report and b'"rows":10' in report
    jobs.reported(job_id, report)
    assert jobs.reports() == []
    app.execute('UPDATE "we""ird" SET v = \'live\' WHERE id = 20')  # capture goes on
    # a restart: a new instance over the same state.db goes on from the cursor
    jobs = Resnapshots(cap.db, cap.state, uploads, chunk_rows=10, max_open=1)
    for _ in range(3):  # chunks 2 and 3 (the last, short), then nothing left open
        with cap.state.tx():
            cap.state.db.execute("DELETE FROM uploads")  # as if the cloud committed it
        jobs.step(lambda _: info)
    keys = _journaled(cap.db)
    assert sorted(keys) == sorted(tuple(r) for r in app.execute(
        'SELECT site, id FROM "we""ird" WHERE id <> 4'))
    assert len(keys) == len(set(keys)) == 24
    [(_, report)] = jobs.reports()
    assert b'"status":"completed"' in report and b'"rows":24' in report


def test_bucket_filter_selects_exactly_its_keys(app: sqlite3.Connection, capture: Any,
                                                tmp_path: Path) -> None:
    _setup(app, 200)
    cap = capture()
    info = _info(cap)
    jobs = Resnapshots(cap.db, cap.state, Uploads(cap.db, cap.state, tmp_path / "spool"))
    def bucket(site: str, i: int) -> str:
        return _core.pk_hash(pk_json(["site", "id"], [site, i]))[:1]

    want = {bucket("a", 1), bucket("b", 2)}
    jobs.requested({"source_table": info.name, "job_id": "j2",
                    "filter": {"buckets": {"prefix": 1, "values": sorted(want)}}}, info)
    jobs.step(lambda _: info)
    expected = {(s, i) for s, i in app.execute('SELECT site, id FROM "we""ird"')
                if bucket(s, i) in want}
    assert set(_journaled(cap.db)) == expected and 0 < len(expected) < 200


def test_a_refused_filter_fails_the_job_with_the_reason(app: sqlite3.Connection, capture: Any,
                                                        tmp_path: Path) -> None:
    _setup(app, 3)
    cap = capture()
    info = _info(cap)
    jobs = Resnapshots(cap.db, cap.state, Uploads(cap.db, cap.state, tmp_path / "spool"))
    jobs.requested({"source_table": info.name, "job_id": "j3",
                    "filter": {"where": [{"column": "gone", "op": "eq", "value": 1}]}}, info)
    [(_, report)] = jobs.reports()
    assert b'"status":"failed"' in report and b"unknown column(s) gone" in report


def test_device_digest_equals_the_digest_of_the_cloud_values(app: sqlite3.Connection,
                                                            capture: Any) -> None:
    _setup(app, 50)
    info = _info(capture())
    cols = [{"name": "b"}, {"name": "m", "text": True}, {"name": "v"}]
    got = table_digest(app, info, cols, 2)
    # what the mirror holds: bytea, NUMERIC as the text the agent sent, text
    cloud = TableDigest(2, frozenset({1}))
    for i in range(1, 51):
        m: float = i * 1.5 if i % 3 else i
        m = int(m) if m == int(m) else m  # SQLite's NUMERIC keeps 3.0 as the integer 3
        cloud.add(_core.pk_hash(pk_json(["site", "id"], ["a" if i % 2 else "b", i])),
                  [bytes([i % 256]), str(m), f"v{i}"])
    assert (got["rows"], got["buckets"]) == (50, cloud.buckets())
    app.execute('UPDATE "we""ird" SET v = \'x\' WHERE id = 7')
    changed = table_digest(app, info, cols, 2)["buckets"]
    assert [b for b in changed if changed[b] != got["buckets"][b]] == [
        _core.pk_hash(pk_json(["site", "id"], ["a", 7]))[:2]]
