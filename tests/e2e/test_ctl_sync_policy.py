"""A sync policy reaches running agents (real agents, Mosquitto, PostgreSQL, ``edgesync
serve``): attaching and then changing a policy sends each device a signed
``sync_policy`` control; both agents acknowledge it, but only the one whose YAML says
``remote_policy: true`` applies it, without a restart — its next batches follow the new
strategies (a table its YAML ignored is replicated, a telemetry table sends only the
policy's ``include_columns``) — while the other keeps its YAML's strategies.

No negative check waits for "nothing arrived": each device's last insert is into a table
both keep replicating (``t``), and the agent publishes a flush's tables in order, so once
that marker's batch is on the wire anything the policy would have changed is too."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest
from control_kit import control_status, pending_controls
from kits.e2e_kit import Device, Wire, app, cloud, eventually, pool_of, register, running_agent

from edgesync import syncpolicy

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]

SCHEMA = ("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)",
          "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)",
          "CREATE TABLE readings (id INTEGER PRIMARY KEY, at TEXT NOT NULL, temp REAL, "
          "hum REAL)")
ALL = {"id", "at", "temp", "hum"}  # a telemetry row's fields with every column
FIRST = {"t": {"strategy": "rows"}, "notes": {"strategy": "rows"}}
CHANGED = {**FIRST, "readings": {"strategy": "telemetry", "ts_column": "at",
                                 "include_columns": ["temp"]}}


async def _device(pool: asyncpg.Pool, tmp_path: Path, mqtt_url: str, unique: str, tag: str,
                  monkeypatch: pytest.MonkeyPatch, *, opted_in: bool) -> Device:
    env = f"EDGESYNC_E2E_TOKEN_{tag.upper()}_{unique.upper()}"
    monkeypatch.setenv(env, f"tok-{tag}")
    dev = await register(pool, tmp_path, mqtt_url, unique, tag=tag, telemetry={"readings": "at"},
                         signed_token=f"tok-{tag}", token_env=env, remote_policy=opted_in)
    # The YAML: notes ignored, readings telemetry with every column.
    text = dev.config.read_text().replace(
        "  table_strategies:\n", "  table_strategies:\n    notes:\n      strategy: ignore\n")
    dev.config.write_text(text)
    app(dev.db, *SCHEMA)
    return dev


def _executed(state_db: Path, control_id: str) -> bool:
    """The agent finished executing the control (it acknowledges before executing)."""
    with contextlib.closing(sqlite3.connect(state_db, timeout=10)) as db:
        row = db.execute("SELECT executed FROM controls WHERE control_id = ?",
                         (control_id,)).fetchone()
    return row is not None and bool(row[0])


async def _policy_applied(pool: asyncpg.Pool, dev: Device, *, version: int | None
                          ) -> dict[str, Any]:
    """The latest sync_policy control for ``dev`` (of that policy version; None: the one
    of a detach), once acknowledged in the cloud and executed by the agent."""
    async def probe() -> dict[str, Any] | None:
        recs = await pending_controls(pool, dev, "sync_policy")
        body = dict(recs[-1]["body"]) if recs else None
        if (body is None or body["policy_version"] != version
                or not await control_status(pool, recs[-1]["id"], "acked")):
            return None
        return body if _executed(dev.state_db, body["control_id"]) else None

    return await eventually(probe, what=f"sync_policy version {version} applied", limit=60)


def _write(dev: Device, n: int) -> None:
    app(dev.db, ("INSERT INTO readings (at, temp, hum) VALUES (?, ?, ?)",
                 [(f"2026-01-01T00:00:{n:02d}Z", 20.0 + n, 50.0 + n)]),
        ("INSERT INTO notes VALUES (?, ?)", [(n, f"note {n}")]),
        ("INSERT INTO t VALUES (?, ?)", [(n, f"marker {n}")]))


def _rows_of(wire: Wire, table: str) -> list[dict[str, Any]]:
    return [r for d in wire.batches(table) for r in d["rows"]]


def _telemetry_fields(wire: Wire) -> list[dict[str, Any]]:
    return [r["fields"] for d in wire.docs("/sync/telemetry/batch")
            if d["source_table"] == "readings" for r in d["rows"]]


def _reading(wire: Wire, n: int) -> dict[str, Any] | None:
    """The fields the n-th reading travelled with (None: not sent yet)."""
    found = [f for f in _telemetry_fields(wire) if f.get("temp") == 20.0 + n]
    return found[0] if found else None


def _marker_sent(wire: Wire, n: int) -> bool:
    return f'"marker {n}"' in orjson.dumps(_rows_of(wire, "t")).decode()


def _stored_policy(state_db: Path) -> dict[str, Any] | None:
    with contextlib.closing(sqlite3.connect(state_db, timeout=10)) as db:
        row = db.execute("SELECT value FROM meta WHERE key = 'remote_policy'").fetchone()
    return orjson.loads(row[0]) if row else None


async def test_a_policy_change_reaches_the_agent_that_opted_in_and_not_the_other(
        tmp_path: Path, database_url: str, mqtt_url: str, unique: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        pool = pool_of(server)
        yes = await _device(pool, tmp_path, mqtt_url, unique, "spy", monkeypatch,
                            opted_in=True)
        no = await _device(pool, tmp_path, mqtt_url, unique, "spn", monkeypatch,
                           opted_in=False)
        async with (Wire(mqtt_url, yes.root, unique) as wire_yes,
                    Wire(mqtt_url, no.root, unique) as wire_no,
                    running_agent(yes), running_agent(no)):
            for dev, wire in ((yes, wire_yes), (no, wire_no)):
                _write(dev, 1)  # before any policy: the YAML's strategies
                await eventually(lambda w=wire: _async(_marker_sent(w, 1)), what="marker 1")
                assert _rows_of(wire, "notes") == []
                fields = await eventually(lambda w=wire: _async(_reading(w, 1)), what="reading")
                assert fields.keys() == ALL

            # Attach a policy to each device, then change it: version 2 reaches both.
            policies = {}
            async with pool.acquire() as conn:
                for dev in (yes, no):
                    p = await syncpolicy.create_policy(conn, dev.scope.project_id,
                                                       name="floor", table_strategies=FIRST)
                    await syncpolicy.attach_policy(conn, dev.scope.project_id, p.id,
                                                   device_id=dev.id)
                    policies[dev.id] = p.id
                for dev in (yes, no):
                    await syncpolicy.update_policy(conn, dev.scope.project_id,
                                                   policies[dev.id],
                                                   {"table_strategies": CHANGED})
            for dev in (yes, no):
                body = await _policy_applied(pool, dev, version=2)
                assert body["table_strategies"]["readings"]["include_columns"] == ["temp"]
            for wire in (wire_yes, wire_no):  # signed on the wire, like every control
                (sent, *_) = wire.controls("sync_policy")
                assert "signature" in sent and "sig_seq" in sent

            for dev in (yes, no):
                _write(dev, 2)
            # Opted in: notes now replicate, readings carry only the policy's columns.
            await eventually(lambda: _async(_marker_sent(wire_yes, 2)), what="yes marker 2")
            await eventually(lambda: _async(bool(_rows_of(wire_yes, "notes"))),
                             what="notes replicated by the opted-in agent")
            fields = await eventually(lambda: _async(_reading(wire_yes, 2)), what="reading 2")
            assert fields.keys() == {"at", "temp"}  # the policy's include_columns (+ ts)
            assert "note 2" in orjson.dumps(_rows_of(wire_yes, "notes")).decode()
            stored = _stored_policy(yes.state_db)
            assert stored is not None and stored["policy_version"] == 2
            # Not opted in: acknowledged, nothing changed.
            await eventually(lambda: _async(_marker_sent(wire_no, 2)), what="no marker 2")
            assert _rows_of(wire_no, "notes") == []
            fields = await eventually(lambda: _async(_reading(wire_no, 2)), what="reading 2")
            assert fields.keys() == ALL
            assert _stored_policy(no.state_db) is None

            # Detached: the opted-in agent goes back to its YAML (notes ignored again).
            async with pool.acquire() as conn:
                await syncpolicy.detach_policy(conn, yes.scope.project_id, policies[yes.id],
                                               device_id=yes.id)
            await _policy_applied(pool, yes, version=None)
            assert _detached(yes)
            seen = len(_rows_of(wire_yes, "notes"))
            _write(yes, 3)
            await eventually(lambda: _async(_marker_sent(wire_yes, 3)), what="yes marker 3")
            assert len(_rows_of(wire_yes, "notes")) == seen
            fields = await eventually(lambda: _async(_reading(wire_yes, 3)), what="reading 3")
            assert fields.keys() == ALL


def _detached(dev: Device) -> bool:
    stored = _stored_policy(dev.state_db)
    return stored is not None and stored["table_strategies"] is None


async def _async(value: Any) -> Any:
    return value
