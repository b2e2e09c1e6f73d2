"""``edgesync devices credentials|bundle|revoke``, ``edgesync jitr …`` and
``edgesync broker-config`` as an operator runs them."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from edgesync.agent.config import parse_config

EDGESYNC = shutil.which("edgesync", path=str(Path(sys.executable).parent)) or "edgesync"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EDGESYNC, *args], capture_output=True, text=True, timeout=120,
                          check=False)


def run_json(*args: str) -> Any:
    out = run(*args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _env(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines()
             if line and not line.startswith("#"))
    return {k: v for k, v in pairs}


@pytest.mark.parametrize("command", [
    ["devices", "credentials"], ["devices", "bundle"], ["devices", "revoke"], ["jitr"],
    ["jitr", "issue"], ["jitr", "list"], ["jitr", "revoke"], ["broker-config"]])
def test_help(command: list[str]) -> None:
    out = run(*command, "--help")
    assert out.returncode == 0 and "usage: edgesync" in out.stdout


def test_credentials_are_shown_once_then_listed_without_secrets(database_url: str,
                                                                unique: str) -> None:
    db = ("--database-url", database_url)
    project = f"cli-cred-{unique}"
    run_json("devices", "add", "gw-1", "--project", project, "--topic-slug", f"cc{unique}", *db)
    out = run("devices", "credentials", "gw-1", "--project", project, "--password", "--cert",
              *db)
    assert out.returncode == 0, out.stderr
    assert "shown only once" in out.stderr
    issued = json.loads(out.stdout)
    assert issued["root_topic"] == f"cc{unique}/gw-1"
    assert issued["password"]["username"] == "gw-1" and len(issued["password"]["password"]) > 30
    assert "BEGIN PRIVATE KEY" in issued["certificate"]["private_key_pem"]
    listed = run_json("devices", "credentials", "gw-1", "--project", project, *db)
    assert sorted(c["kind"] for c in listed) == ["certificate", "password"]
    assert issued["password"]["password"] not in json.dumps(listed)
    assert "PRIVATE KEY" not in json.dumps(listed)
    revoked = run_json("devices", "revoke", "gw-1", "--project", project, *db)
    assert revoked["revoked"] == 2 and "broker-config" in revoked["next"]
    none = run("devices", "credentials", "nope", "--project", project, *db)
    assert none.returncode == 2 and "nope" in none.stderr


def test_bundle_holds_a_working_agent_config(database_url: str, unique: str,
                                             tmp_path: Path) -> None:
    db = ("--database-url", database_url)
    project, slug = f"cli-bundle-{unique}", f"cb{unique}"
    run_json("devices", "add", "gw-7", "--project", project, "--topic-slug", slug, *db)
    # broker-config first, so the bundle carries the server CA it issued
    conf = run_json("broker-config", "--out", str(tmp_path / "broker"), "--project", project,
                    "--worker-username", f"w-{unique}", *db)
    assert conf["worker"]["password"] and conf["listeners"][0]["mtls_port"] == 8883
    again = run_json("broker-config", "--out", str(tmp_path / "broker"), "--project", project,
                     "--worker-username", f"w-{unique}", *db)
    assert "password" not in again["worker"]  # kept, not rotated

    out = tmp_path / "bundle"
    got = run_json("devices", "bundle", "gw-7", "--project", project, "--out", str(out),
                   "--mqtt-url", "ssl://127.0.0.1:8883", "--install-dir", str(out), *db)
    assert sorted(got["files"]) == sorted(
        ["ca.pem", "device.pem", "device.key", "agent.yaml", "agent.env"])
    assert (out / "ca.pem").read_text() == (tmp_path / "broker" / "server-ca.pem").read_text()
    assert stat.S_IMODE((out / "device.key").stat().st_mode) == 0o600
    assert stat.S_IMODE((out / "agent.env").stat().st_mode) == 0o600
    doc = yaml.safe_load((out / "agent.yaml").read_text())
    assert doc["connection"]["root_topic"] == f"{slug}/gw-7"
    assert doc["connection"]["server_url"] == "ssl://127.0.0.1:8883"
    env = _env(out / "agent.env")
    cfg, errors = parse_config(doc, env)
    assert not errors, errors
    assert cfg is not None
    assert cfg.connection.device_id == "gw-7" and cfg.connection.root_topic == f"{slug}/gw-7"
    assert cfg.connection.tls_client_key_path == out / "device.key"
    assert cfg.security.signed_control and cfg.security.auth_token == env["EDGESYNC_AUTH_TOKEN"]
    # this cloud inflates zstd batches: its own devices send them (issue 29)
    assert doc["sqlite-replication"]["compression"] == "zstd"
    assert cfg.replication.compression == "zstd"

    pw_out = tmp_path / "bundle-pw"
    run_json("devices", "bundle", "gw-7", "--project", project, "--out", str(pw_out),
             "--auth", "password", "--mqtt-url", "ssl://127.0.0.1:8885",
             "--install-dir", str(pw_out), *db)
    doc = yaml.safe_load((pw_out / "agent.yaml").read_text())
    assert "server_url" not in doc["connection"]
    env = _env(pw_out / "agent.env")
    # the same control token: the cloud signs controls with one key per device
    assert env["EDGESYNC_AUTH_TOKEN"] == _env(out / "agent.env")["EDGESYNC_AUTH_TOKEN"]
    cfg, errors = parse_config(doc, env)
    assert not errors and cfg is not None
    assert cfg.connection.broker.username == "gw-7" and cfg.connection.broker.password
    assert not (pw_out / "device.key").exists()

    plain = run("devices", "bundle", "gw-7", "--project", project, "--out", str(pw_out),
                "--mqtt-url", "mqtt://127.0.0.1:1883", *db)
    assert plain.returncode == 2 and "TLS" in plain.stderr


def test_jitr_issue_list_revoke(database_url: str, unique: str, tmp_path: Path) -> None:
    db = ("--database-url", database_url)
    project = f"cli-jitr-{unique}"
    run_json("devices", "add", "seed", "--project", project, "--topic-slug", f"cj{unique}", *db)
    out = tmp_path / "boot"
    issued = run_json("jitr", "issue", "--project", project, "--fleet", "line-2", "--quota", "3",
                      "--out", str(out), *db)
    assert issued["max_devices"] == 3
    assert issued["enroll_url"].endswith(f"/projects/{issued['project_id']}/jitr/enroll")
    assert stat.S_IMODE((out / "bootstrap-private.key.pem").stat().st_mode) == 0o600
    assert "BEGIN CERTIFICATE" in (out / "bootstrap-certificate.pem").read_text()
    assert json.loads((out / "jitr.json").read_text())["fleet_id"] == issued["fleet_id"]
    listed = run_json("jitr", "list", "--project", project, *db)
    assert [(b["serial"], b["status"], b["fleet"]) for b in listed] == [
        (issued["serial"], "active", "line-2")]
    run_json("jitr", "revoke", issued["serial"], "--project", project, *db)
    assert run_json("jitr", "list", "--project", project, *db)[0]["status"] == "revoked"
    bad = run("jitr", "issue", "--project", project, "--fleet", "f", "--quota", "0", *db)
    assert bad.returncode == 2 and "max_devices" in bad.stderr


def test_bundle_takes_the_project_by_name_or_id(database_url: str, unique: str,
                                                tmp_path: Path) -> None:
    db = ("--database-url", database_url)
    project = f"cli-ref-{unique}"
    added = run_json("devices", "add", "gw-3", "--project", project, "--topic-slug",
                     f"cr{unique}", *db)
    by_id = run_json("devices", "bundle", "gw-3", "--project", str(added["project_id"]),
                     "--out", str(tmp_path / "b"), "--auth", "password",
                     "--mqtt-url", "ssl://127.0.0.1:8885", *db)
    assert by_id["root_topic"] == f"cr{unique}/gw-3"
    listed = run_json("devices", "credentials", "gw-3", "--project", project, *db)
    assert [c["kind"] for c in listed] == ["password"]


def test_without_a_database_option_no_new_embedded_postgres_is_made(tmp_path: Path) -> None:
    # an empty user data directory: the default would be {XDG_DATA_HOME}/edgesync
    env = {"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
           "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    for argv in (["devices", "bundle", "gw-1", "--project", "p", "--out", str(tmp_path / "o")],
                 ["devices", "credentials", "gw-1", "--project", "p"],
                 ["admin", "bootstrap", "--org", "o", "--project", "p"]):
        out = subprocess.run([EDGESYNC, *argv], capture_output=True, text=True, timeout=60,
                             check=False, env=env)
        assert out.returncode == 2, out.stderr
        assert out.stderr.count("\n") == 1 and "--data-dir" in out.stderr, out.stderr
        assert "--database-url" in out.stderr
    assert not (tmp_path / "data").exists()


def test_a_revoked_device_gets_no_bundle(database_url: str, unique: str, tmp_path: Path) -> None:
    db = ("--database-url", database_url)
    project = f"cli-rev-{unique}"
    run_json("devices", "add", "gw-r", "--project", project, "--topic-slug", f"cr{unique}", *db)
    revoked = run_json("devices", "revoke", "gw-r", "--project", project, *db)
    assert "device_revoked_at" in revoked
    out = run("devices", "bundle", "gw-r", "--project", project, "--out", str(tmp_path / "b"),
              "--mqtt-url", "ssl://broker.example:8883", *db)
    assert out.returncode != 0 and "is revoked" in out.stderr
