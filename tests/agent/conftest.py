"""Fixtures of the agent tests: an application SQLite file, the application's own
connection, and the agent's capture side without MQTT."""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

MQTT_URL = os.environ.get("EDGESYNC_TEST_MQTT_URL", "mqtt://127.0.0.1:1883")


@pytest.fixture
def source_db(tmp_path: Path) -> Path:
    """An application database file (WAL, like most device apps use)."""
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode = WAL")
    db.close()
    return path


@pytest.fixture
def app(source_db: Path) -> Iterator[sqlite3.Connection]:
    """The application's own connection: plain sqlite3, autocommit, no agent code."""
    db = sqlite3.connect(source_db, isolation_level=None)
    db.execute("PRAGMA busy_timeout = 5000")
    yield db
    db.close()


@pytest.fixture
def device_id() -> str:
    return f"test-agent-{uuid.uuid4().hex[:12]}"


class Capture:
    """The agent's capture side, without MQTT: triggers installed, state.db opened."""

    def __init__(self, source: Path, state: Path, strategies: dict[str, object] | None = None,
                 snapshot: bool = False) -> None:
        from edgesync.agent._state import StateStore
        from edgesync.agent.capture._batcher import Batcher, read_journal
        from edgesync.agent.capture._discovery import discover
        from edgesync.agent.capture._triggers import install_triggers
        from edgesync.agent.config import ReplicationConfig
        from edgesync.protocol import TableStrategy

        self.replication = ReplicationConfig(
            source_db_path=source, state_db_path=state,
            table_strategies={k: TableStrategy(**v)
                              for k, v in (strategies or {}).items()})
        self.db = sqlite3.connect(source, isolation_level=None)
        self.state = StateStore(state)
        self.discovery = discover(self.db, self.replication)
        self.installed = install_triggers(
            self.db, self.discovery.rows, snapshot=snapshot,
            known=[t.source_table for t in self.state.tables()])
        self.journal_id = self.installed.journal_id
        self.state.bind_journal(self.journal_id)
        for t in self.discovery.rows:
            self.state.ensure_table(t.name, *t.fingerprint())
        self.batcher = Batcher(self.db, self.state)
        self.batcher.set_tables(self.discovery.rows)
        self._read = read_journal

    def journal(self) -> list[tuple[int, str, str, dict[str, object], dict[str, object] | None]]:
        """The journal as batches would carry it: (commit_seq, table, op, pk, row), rows
        read from the table now; entries whose row is gone are left out."""
        out = []
        for t in self.discovery.rows:
            for r in self._read(self.db, t, after=0, limit=1 << 30):
                if r.encoded is not None:
                    doc = json.loads(r.encoded)
                    out.append((doc["commit_seq"], t.name, doc["op"], doc["pk"], doc["row"]))
        return sorted(out, key=lambda e: e[0])

    def ops(self) -> list[tuple[int, str, str]]:
        """The raw journal: (commit_seq, table, op)."""
        return [tuple(r) for r in self.db.execute(  # type: ignore[misc]
            "SELECT commit_seq, table_name, op FROM __edgesync_journal ORDER BY 1")]

    def close(self) -> None:
        self.batcher.close()
        self.db.close()
        self.state.close()


@pytest.fixture
def capture(source_db: Path, tmp_path: Path) -> Iterator[type[Capture]]:
    opened: list[Capture] = []

    class _Bound(Capture):
        def __init__(self, strategies: dict[str, object] | None = None,
                     state: Path | None = None, snapshot: bool = False) -> None:
            super().__init__(source_db, state or tmp_path / "state" / "state.db", strategies,
                             snapshot)
            opened.append(self)

    yield _Bound
    for c in opened:
        c.close()
