"""The files ``edgesync broker-config`` writes, without starting a broker."""

from __future__ import annotations

import stat
from pathlib import Path

import asyncpg
import pytest

from edgesync import credentials, fleet
from edgesync.broker import (
    MosquittoConfig,
    ProjectListeners,
    device_acl,
    worker_acl,
    write_mosquitto_config,
)
from edgesync.credentials import BrokerConfigOptions
from edgesync.errors import ConfigError, NotFoundError


def test_device_acl_is_per_project_and_never_writes_controls() -> None:
    acl = device_acl("acme").splitlines()
    rules = [line for line in acl if not line.startswith("#")]
    assert "pattern read acme/%u/sync/ingest/control" in rules
    assert "pattern write acme/%u/sync/rows/batch" in rules
    assert not any("control" in r for r in rules if r.startswith("pattern write"))
    assert all(r.startswith("pattern ") and "/%u/" in r for r in rules)
    assert not any(r.startswith(("topic", "user")) for r in rules)
    # no slug: an empty first level, as the topic layout says
    assert "pattern write /%u/sync/rows/batch" in device_acl("").splitlines()


def test_worker_acl_reads_uplinks_and_writes_controls_only() -> None:
    rules = worker_acl("w").splitlines()
    assert "user w" in rules
    assert "topic write +/+/sync/ingest/control" in rules
    assert "topic read +/+/sync/rows/batch" in rules
    assert [r for r in rules if r.startswith("topic write")] == [
        "topic write +/+/sync/ingest/control"]


def _cfg(tmp_path: Path, **kw: object) -> MosquittoConfig:
    project = ProjectListeners(project_id="p1", name="p", slug="s", mtls_port=8883,
                               password_port=8885, device_ca_pem="CA", crl_pem="CRL",
                               passwords=[("dev-a", "$7$x")])
    base: dict[str, object] = {"server_cert": tmp_path / "s.pem", "server_key": tmp_path / "s.key",
                               "worker_username": "w", "worker_password_hash": "$7$w",
                               "projects": [project]}
    return MosquittoConfig(**(base | kw))  # type: ignore[arg-type]


def test_files_and_modes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    files = write_mosquitto_config(_cfg(tmp_path), out)
    assert files[0] == out.resolve() / "mosquitto.conf"
    conf = files[0].read_text()
    for line in ("per_listener_settings true", "require_certificate true",
                 "use_identity_as_username true", "use_username_as_clientid true",
                 "allow_anonymous false", f"crlfile {out.resolve()}/projects/p1/device-ca.crl"):
        assert line in conf
    assert conf.count("use_username_as_clientid true") == 2  # mTLS and password listeners
    assert (out / "projects/p1/devices.passwd").read_text() == "dev-a:$7$x\n"
    assert stat.S_IMODE((out / "worker.passwd").stat().st_mode) == 0o600
    assert not list(out.rglob("*.tmp"))


def test_refusals(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="port"):
        write_mosquitto_config(_cfg(tmp_path, worker_port=8883), tmp_path / "a")
    with pytest.raises(ConfigError, match="spaces"):
        write_mosquitto_config(_cfg(tmp_path), tmp_path / "with space")
    bad = ProjectListeners(project_id="p1", name="p", slug="s", mtls_port=1, password_port=None,
                           device_ca_pem="", crl_pem="", passwords=[("a:b", "$7$")])
    with pytest.raises(ConfigError, match="password-file"):
        write_mosquitto_config(_cfg(tmp_path, projects=[bad]), tmp_path / "b")


async def test_every_project_gets_its_own_listeners(pool: asyncpg.Pool, unique: str,
                                                    tmp_path: Path) -> None:
    names = [f"multi-{unique}-{i}" for i in range(2)]
    async with pool.acquire() as conn:
        for i, name in enumerate(names):
            scope = await fleet.add_device(conn, project=name, name="same-name",
                                           topic_slug=f"m{unique}{i}")
            await credentials.issue_password(conn, scope)
        result = await credentials.write_broker_config(conn, tmp_path / "out", BrokerConfigOptions(
            projects=names, mtls_port=9000, password_port=9001, worker_port=9002,
            worker_username=f"w-{unique}"))
        with pytest.raises(NotFoundError):
            await credentials.write_broker_config(conn, tmp_path / "x", BrokerConfigOptions(
                projects=["no-such-project"]))
    ports = [(entry["mtls_port"], entry["password_port"]) for entry in result.listeners]
    assert ports == [(9000, 9001), (9003, 9004)]  # 9002 is the worker's
    acls = sorted(p.read_text() for p in (tmp_path / "out").glob("projects/*/devices.acl"))
    assert len(acls) == 2 and acls[0] != acls[1]
    passwds = list((tmp_path / "out").glob("projects/*/devices.passwd"))
    assert [p.read_text().split(":")[0] for p in passwds] == ["same-name", "same-name"]
    assert result.server_ca is not None and result.worker_password


async def test_worker_username_must_be_a_plain_name(pool: asyncpg.Pool, tmp_path: Path) -> None:
    async with pool.acquire() as conn:
        for bad in ("a b", "w+", "#w", "x:y", ""):
            with pytest.raises(ConfigError, match="worker-username"):
                await credentials.write_broker_config(conn, tmp_path, BrokerConfigOptions(
                    projects=["none"], worker_username=bad))
