"""The agent's source database: a file that is not SQLite is one line (run and validate),
``agent validate`` checks the configured tables and columns in it, and a second agent on
the same source or state database is refused with one line while the first runs."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

EDGESYNC = shutil.which("edgesync", path=str(Path(sys.executable).parent)) or "edgesync"


def config(where: Path, source: Path, state: Path, extra: str = "",
           name: str = "agent.yaml") -> Path:
    path = where / name
    # Port 1 has no broker: the agent keeps retrying, which is all a lock test needs.
    path.write_text(textwrap.dedent(f"""\
        connection:
          server_url: mqtt://127.0.0.1:1
          device_id: gw-1
        sqlite-replication:
          source_db_path: {source}
          state_db_path: {state}
        """) + textwrap.indent(textwrap.dedent(extra), "  "), encoding="utf-8")
    return path


def edgesync(*args: str) -> subprocess.CompletedProcess[str]:
    # WARNING: the agent's INFO start/stop lines aside, stderr is the error line alone.
    return subprocess.run([EDGESYNC, *args], capture_output=True, text=True, timeout=60,
                          check=False, env={**os.environ, "EDGESYNC_LOG_LEVEL": "WARNING"})


@pytest.fixture
def app_db(tmp_path: Path) -> Path:
    path = tmp_path / "app.db"
    db = sqlite3.connect(path)
    db.executescript("CREATE TABLE readings (id INTEGER PRIMARY KEY, at TEXT, v REAL);"
                     "CREATE TABLE Items (id INTEGER PRIMARY KEY, n TEXT);"
                     "CREATE TABLE notes (body TEXT);")
    db.close()
    return path


def test_source_that_is_not_sqlite(tmp_path: Path) -> None:
    source = tmp_path / "app.yaml"
    source.write_text("hello: world\n" * 20)
    cfg = config(tmp_path, source, tmp_path / "state" / "state.db")
    message = (f"sqlite-replication.source_db_path: {str(source)!r} is not a SQLite database; "
               "give the path of your application's SQLite file")
    out = edgesync("agent", "--config", str(cfg))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.splitlines() == [f"edgesync: error: {message}"]
    assert not (tmp_path / "state" / "state.db").exists()  # nothing was set up
    out = edgesync("agent", "validate", "--config", str(cfg))
    assert out.returncode == 1 and out.stderr == ""
    assert out.stdout.splitlines() == [f"{cfg}: {message}"]


def test_a_missing_relative_source_says_where_it_was_looked_for(tmp_path: Path) -> None:
    """One line naming the working directory; no lock file beside a database that does not
    exist, and no "agent started" / "stopped" around the error (issue 27)."""
    cfg = config(tmp_path, Path("missing.db"), tmp_path / "state" / "state.db")
    out = subprocess.run([EDGESYNC, "agent", "--config", str(cfg)], capture_output=True,
                         text=True, timeout=60, check=False, cwd=tmp_path,
                         env={**os.environ, "EDGESYNC_LOG_LEVEL": "INFO"})
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.splitlines() == [
        "edgesync: error: sqlite-replication.source_db_path: file 'missing.db' does not exist "
        f"(a relative path is read from the working directory, {tmp_path})"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.yaml"]


def test_validate_checks_tables_and_columns(tmp_path: Path, app_db: Path) -> None:
    cfg = config(tmp_path, app_db, tmp_path / "state.db", """\
          table_strategies:
            readings: {strategy: telemetry, ts_column: ts}
            items: {strategy: rows}
            logs: {strategy: rows}
            notes: {strategy: rows}
            gone: {strategy: ignore}
        """)
    out = edgesync("agent", "validate", "--config", str(cfg))
    assert out.returncode == 1, out.stderr
    base = f"{cfg}: sqlite-replication.table_strategies"
    assert out.stdout.splitlines() == [
        f"{base}.readings.ts_column: 'ts' is not a column of 'readings' (columns: id, at, v)",
        f"{base}.items: no table 'items' in the source database (did you mean 'Items'? table "
        "names in table_strategies are case-sensitive)",
        f"{base}.logs: no table 'logs' in the source database (tables: Items, notes, readings)",
        f"{base}.notes.strategy: rows needs an explicit PRIMARY KEY; add one, or use strategy "
        "telemetry or ignore",
    ]
    good = config(tmp_path, app_db, tmp_path / "state.db", """\
          table_strategies:
            readings: {strategy: telemetry, ts_column: at, include_columns: [v, w]}
        """, name="good.yaml")
    out = edgesync("agent", "validate", "--config", str(good))
    assert out.stdout.splitlines() == [
        f"{good}: sqlite-replication.table_strategies.readings.include_columns: "
        "include_columns names missing column(s) ['w'] (columns: id, at, v)"]
    good.write_text(good.read_text().replace(", w]", "]"))
    out = edgesync("agent", "validate", "--config", str(good))
    assert (out.returncode, out.stdout) == (0, f"{good}: OK\n")
    assert not (tmp_path / "state.db").exists()  # validate changes nothing


def test_tls_file_that_is_not_pem(tmp_path: Path, app_db: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not a certificate\n")
    cfg = config(tmp_path, app_db, tmp_path / "state.db")
    cfg.write_text(cfg.read_text().replace(
        "server_url: mqtt://127.0.0.1:1\n",
        f"server_url: mqtts://127.0.0.1:1\n  mqtt: {{tls: {{ca_cert_path: {ca}}}}}\n"))
    out = edgesync("agent", "--config", str(cfg))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.splitlines() == [
        f"edgesync: error: connection.mqtt.tls.ca_cert_path: {str(ca)!r} holds no PEM CA "
        "certificate (NO_CERTIFICATE_OR_CRL_FOUND)"]


class Running:
    def __init__(self, cfg: Path) -> None:
        self.proc = subprocess.Popen([EDGESYNC, "agent", "--config", str(cfg)],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def wait_capturing(self) -> None:
        assert self.proc.stdout is not None
        seen = []
        deadline = time.monotonic() + 60
        for line in self.proc.stdout:
            seen.append(line)
            if "capturing" in line:
                return
            assert time.monotonic() < deadline, "".join(seen)
        raise AssertionError("agent exited:\n" + "".join(seen))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0


@pytest.fixture
def first(tmp_path: Path, app_db: Path) -> Iterator[Running]:
    agent = Running(config(tmp_path, app_db, tmp_path / "a" / "state.db", name="a.yaml"))
    try:
        agent.wait_capturing()
        yield agent
    finally:
        if agent.proc.poll() is None:
            agent.proc.kill()
            agent.proc.communicate()


def test_second_agent_on_one_database_is_refused(tmp_path: Path, app_db: Path,
                                                 first: Running) -> None:
    pid = first.proc.pid
    # The same configuration: the source database's lock names the first agent.
    same = config(tmp_path, app_db, tmp_path / "a" / "state.db", name="same.yaml")
    out = edgesync("agent", "--config", str(same))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.splitlines() == [
        f"edgesync: error: sqlite-replication.source_db_path: {str(app_db)!r} is captured by "
        f"another edgesync agent (pid {pid}); stop it first (two agents on one database "
        "fight over its journal and MQTT session)"]
    # Its own state database, the same source reached through a symlink: refused too.
    link = tmp_path / "link.db"
    link.symlink_to(app_db)
    other = config(tmp_path, link, tmp_path / "b" / "state.db", name="other.yaml")
    out = edgesync("agent", "--config", str(other))
    assert out.returncode == 2
    assert f"is captured by another edgesync agent (pid {pid})" in out.stderr
    # Another source but the first one's state database.
    source2 = tmp_path / "app2.db"
    sqlite3.connect(source2).close()
    shared = config(tmp_path, source2, tmp_path / "a" / "state.db", name="shared.yaml")
    out = edgesync("agent", "--config", str(shared))
    assert out.stderr.splitlines() == [
        f"edgesync: error: sqlite-replication.state_db_path: "
        f"{str(tmp_path / 'a' / 'state.db')!r} is used by another edgesync agent (pid {pid}); "
        "stop it, or give each agent its own state_db_path"]
    assert out.returncode == 2
    # A source that is not SQLite, beside the first one's state database: its own mistake
    # is named, not the lock it would have met next (issue 27).
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database\n" * 20)
    wrong = config(tmp_path, notes, tmp_path / "a" / "state.db", name="wrong.yaml")
    out = edgesync("agent", "--config", str(wrong))
    assert out.stderr.splitlines() == [
        f"edgesync: error: sqlite-replication.source_db_path: {str(notes)!r} is not a SQLite "
        "database; give the path of your application's SQLite file"]
    assert not (tmp_path / "notes.txt.edgesync-agent.lock").exists()
    # The refused agents did not disturb the first one.
    assert first.proc.poll() is None
    # Once the first stops (or dies: the kernel drops the lock), the next one starts.
    first.proc.send_signal(signal.SIGKILL)
    first.proc.communicate(timeout=60)
    second = Running(same)
    try:
        second.wait_capturing()
        assert (tmp_path / "app.db.edgesync-agent.lock").read_text() == \
            f"{second.proc.pid}\n"
    finally:
        second.stop()
