"""``state.db`` is created by one versioned list of steps (``_state_schema``): a file the
agent wrote before that list (``state_db_before_versions.sql``: the DDL as main had it,
``user_version`` 0, rows in every table) is upgraded in place with every row kept and
ends with exactly the schema of a new file; a step that fails leaves the file as it was;
a file from a newer agent, or of an unknown format, is refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from edgesync.agent import _state_schema
from edgesync.agent._state import StateStore
from edgesync.agent._state_schema import MIGRATIONS, Migration
from edgesync.agent.capture._telemetry_state import TelemetryState
from edgesync.agent.jobs._resnapshot import Resnapshots
from edgesync.agent.jobs._uploads import Uploads
from edgesync.agent.jobs._verify import Verifications
from edgesync.agent.jobs._writeback import CloudVersions
from edgesync.agent.link._inbox import ControlInbox
from edgesync.errors import DeviceStateError

BEFORE = Path(__file__).with_name("state_db_before_versions.sql")
EPOCH = "0190a1b2-0000-7000-8000-000000000001"


def _legacy(path: Path) -> Path:
    with sqlite3.connect(path) as db:
        db.executescript(BEFORE.read_text())
    db.close()
    return path


def _dump(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table, in a stable order."""
    with sqlite3.connect(path) as db:
        names = [r[0] for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        out = {n: sorted(db.execute(f'SELECT * FROM "{n}"').fetchall(), key=repr)
               for n in names}
    db.close()
    return out


def _schema(path: Path) -> tuple[int, list[tuple[str, str, str, str | None]]]:
    with sqlite3.connect(path) as db:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        rows = db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master "
                          "ORDER BY type, name").fetchall()
    db.close()
    return version, rows


def test_a_state_db_from_before_the_versions_is_upgraded_with_every_row(
        tmp_path: Path) -> None:
    path = _legacy(tmp_path / "state.db")
    assert _schema(path)[0] == 0
    before = _dump(path)
    assert all(before.values()), [t for t, rows in before.items() if not rows]

    state = StateStore(path)
    try:
        # cursors, pending and published batches, gaps
        ts = state.table("device_state")
        assert ts is not None and ts.last_published_commit_seq == 41
        assert ts.journal_epoch == EPOCH and ts.observed_hash == "aa"
        alarms = state.table("alarms")
        assert alarms is not None and alarms.paused and alarms.server_watermark == 5
        pending = state.pending("device_state")
        assert pending is not None and (pending.batch_id, pending.first_commit_seq,
                                        pending.last_commit_seq) == ("batch-pending", 42, 50)
        published = state.published("batch-published")
        assert published is not None and published.published_at == 1720000000.5
        assert [g[1:] for g in state.unreported_gaps()] == [
            ("alarms", "0190a1b2-0000-7000-8000-000000000002", 1, 6)]
        assert state.meta_int("last_sig_seq", 0) == 14
        # the control inbox, telemetry, write-back versions
        assert [a.control_id for a in ControlInbox(state, None).unfinished()] == [
            "ctl-unfinished"]
        telemetry = TelemetryState(state)
        tts = telemetry.table("readings")
        assert tts is not None and tts.next_batch_seq == 9
        assert (tts.cursor_ts_us, tts.cursor_key) == (1720000000000000, "[1]")
        assert [b.batch_id for b in telemetry.unpublished("readings")] == ["tbatch-8"]
        assert telemetry.sent_keys("readings") == {"[1]"}
        assert telemetry.high_water("readings") == (True, 120)
        assert CloudVersions(state).get("device_state", ["[1]"]) == {"[1]": 7}
        # uploads, re-snapshot jobs, verifications
        source = sqlite3.connect(":memory:")
        uploads = Uploads(source, state, tmp_path / "uploads")
        [up] = uploads.with_status("granted")
        assert (up.batch_id, up.first_commit_seq, up.presigned_url) == (
            "upload-1", 51, "http://127.0.0.1:1/u")
        assert uploads.reserved("device_state", EPOCH) == [(51, 51)]
        Resnapshots(source, state, uploads)
        Verifications(source, state)
        source.close()
        assert state.db.execute("SELECT job_id, rows, chunks, cursor FROM resnapshots"
                                ).fetchall() == [("job-r", 10, 1, "[10]")]
        assert state.db.execute("SELECT job_id, sent FROM verifications").fetchall() == [
            ("job-v", 0)]
    finally:
        state.close()
    after = _dump(path)
    assert after.pop("wire_usage") == []  # step 3's new table, empty
    assert after == before  # nothing lost, nothing rewritten
    assert _schema(path)[0] == len(MIGRATIONS)


def test_an_upgraded_state_db_has_the_schema_of_a_new_one(tmp_path: Path) -> None:
    upgraded = _legacy(tmp_path / "upgraded.db")
    StateStore(upgraded).close()
    fresh = tmp_path / "fresh.db"
    StateStore(fresh).close()
    version, rows = _schema(fresh)
    assert version == len(MIGRATIONS) >= 2
    assert {r[1] for r in rows if r[0] == "table"} == {
        "meta", "tables", "pending_batches", "gaps", "controls", "telemetry",
        "telemetry_sent", "telemetry_outbox", "published_batches", "telemetry_rowid",
        "cloud_versions", "uploads", "resnapshots", "verifications", "wire_usage"}
    assert _schema(upgraded) == (version, rows)
    # the format agents before the list check: they still open what this one wrote
    for path in (fresh, upgraded):
        with sqlite3.connect(path) as db:
            assert db.execute("SELECT value FROM meta WHERE key='format'").fetchone() == (
                "3",)
        db.close()
    StateStore(fresh).close()  # opening again runs no step
    assert _schema(fresh) == (version, rows)


def test_a_format_1_state_db_gets_the_columns_it_lacked(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with sqlite3.connect(path) as db:  # the first agent slice's state.db
        db.executescript("""
            CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE tables (source_table TEXT PRIMARY KEY, journal_epoch TEXT NOT NULL,
                last_published_commit_seq INTEGER NOT NULL DEFAULT 0, schema_hash TEXT,
                schema_json TEXT, schema_sent INTEGER NOT NULL DEFAULT 0,
                paused INTEGER NOT NULL DEFAULT 0, server_watermark INTEGER);
            INSERT INTO meta VALUES ('format', '1');
            INSERT INTO tables (source_table, journal_epoch, last_published_commit_seq)
                VALUES ('t', 'e', 12);
        """)
    db.close()
    state = StateStore(path)
    try:
        ts = state.table("t")
        assert ts is not None and ts.last_published_commit_seq == 12
        assert ts.observed_hash is None
        state.mark_observed("t", "ab")
        assert "published_at" in {r[1] for r in state.db.execute(
            "PRAGMA table_info(telemetry_outbox)")}
        assert state.meta_int("format", 0) == 3
    finally:
        state.close()


def test_a_failing_step_leaves_the_file_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state.db"
    StateStore(path).close()
    before = _schema(path)
    broken = Migration("a step that fails half way",
                       "CREATE TABLE half_done (a INTEGER); CREATE TABLE oops (")
    monkeypatch.setattr(_state_schema, "MIGRATIONS", (*MIGRATIONS, broken))
    with pytest.raises(DeviceStateError, match="cannot prepare state database"):
        StateStore(path)
    assert _schema(path) == before  # no half_done table, the version unchanged


def test_a_state_db_from_a_newer_agent_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    StateStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    db.close()
    with pytest.raises(DeviceStateError) as info:
        StateStore(path)
    assert f"schema version {len(MIGRATIONS) + 1}" in str(info.value)
    assert "upgrade the agent" in str(info.value)


def test_a_state_db_of_an_unknown_format_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("INSERT INTO meta VALUES ('format', '9')")
    db.close()
    with pytest.raises(DeviceStateError, match="has format 9"):
        StateStore(path)
    assert _schema(path)[0] == 0
