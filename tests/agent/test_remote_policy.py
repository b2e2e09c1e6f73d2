"""``RemotePolicy``: which strategies the agent runs with when the cloud sends a sync
policy — the YAML's unless ``remote_policy: true``; then the newest valid revision, kept
across a restart, and the YAML's again after a detach."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgesync.agent._state import StateStore
from edgesync.agent.config import AgentConfig, parse_config
from edgesync.agent.link._remote_policy import RemotePolicy


def _config(tmp_path: Path, *, opted_in: bool) -> AgentConfig:
    cfg, errors = parse_config({
        "connection": {"server_url": "mqtt://127.0.0.1:1883", "device_id": "gw"},
        "sqlite-replication": {"source_db_path": str(tmp_path / "app.db"),
                               "state_db_path": str(tmp_path / "state.db"),
                               "remote_policy": opted_in,
                               "table_strategies": {"notes": {"strategy": "ignore"}}}})
    assert errors == [] and cfg is not None
    return cfg


def _control(revision: int, strategies: dict[str, Any] | None) -> dict[str, Any]:
    return {"control_id": f"c{revision}", "control_kind": "sync_policy", "revision": revision,
            "policy_name": "floor", "policy_version": revision,
            "table_strategies": strategies}


def _strategies(cfg: AgentConfig) -> dict[str, str]:
    return {t: s.strategy for t, s in cfg.replication.table_strategies.items()}


def test_the_yaml_wins_unless_it_opts_in(tmp_path: Path) -> None:
    state = StateStore(tmp_path / "state.db")
    try:
        remote = RemotePolicy(_config(tmp_path, opted_in=False), state)
        assert not remote.receive(_control(1, {"notes": {"strategy": "rows"}}))
        assert _strategies(remote.config()) == {"notes": "ignore"}
    finally:
        state.close()


def test_newest_valid_revision_applies_and_survives_a_restart(tmp_path: Path) -> None:
    cfg = _config(tmp_path, opted_in=True)
    state = StateStore(tmp_path / "state.db")
    try:
        remote = RemotePolicy(cfg, state)
        assert remote.receive(_control(5, {"notes": {"strategy": "rows"},
                                           "r": {"strategy": "telemetry", "ts_column": "at",
                                                 "include_columns": ["v"]}}))
        got = remote.config()
        assert _strategies(got) == {"notes": "rows", "r": "telemetry"}
        assert got.replication.strategy_for("r").include_columns == ("v",)
        assert got.connection == cfg.connection  # nothing else of the YAML changes
        # Older or equal revisions (a late redelivery) and invalid strategies change nothing.
        assert not remote.receive(_control(4, {"notes": {"strategy": "ignore"}}))
        assert not remote.receive(_control(5, {"notes": {"strategy": "ignore"}}))
        assert not remote.receive(_control(6, {"r": {"strategy": "telemetry"}}))
        assert not remote.receive({**_control(7, {}), "revision": "7"})
        assert _strategies(remote.config()) == {"notes": "rows", "r": "telemetry"}
    finally:
        state.close()
    state = StateStore(tmp_path / "state.db")  # the agent restarted
    try:
        remote = RemotePolicy(cfg, state)
        assert _strategies(remote.config()) == {"notes": "rows", "r": "telemetry"}
        # Detached: back to the YAML's strategies.
        assert remote.receive(_control(8, None))
        assert _strategies(remote.config()) == {"notes": "ignore"}
    finally:
        state.close()
