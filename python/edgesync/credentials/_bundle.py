"""What a device needs, written to a directory: ``agent.yaml`` (the layout of
``agent/edgesync-agent.example.yaml``), ``agent.env`` (secrets and per-machine paths),
the broker CA, and — for mTLS — the client certificate and key.

Paths inside the files point to ``install_dir`` (default ``/etc/edgesync``), where the
bundle's files are meant to be copied on the device.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from edgesync.credentials._device_credentials import CertificateSecret, PasswordSecret
from edgesync.errors import ConfigError
from edgesync.fleet import DeviceScope
from edgesync.protocol import Compression, parse_broker_url
from edgesync.syncpolicy import EffectivePolicy

__all__ = ["BundleFiles", "render_agent_yaml", "write_bundle"]

CA_FILE, CERT_FILE, KEY_FILE = "ca.pem", "device.pem", "device.key"
YAML_FILE, ENV_FILE = "agent.yaml", "agent.env"


@dataclass(frozen=True, slots=True)
class BundleFiles:
    directory: Path
    files: tuple[str, ...]


def _url_with_password(url: str, secret: PasswordSecret) -> str:
    parsed = parse_broker_url(url, "--mqtt-url")
    scheme = url.split("://", 1)[0]
    return (f"{scheme}://{quote(secret.username, safe='')}:{quote(secret.password, safe='')}"
            f"@{parsed.host}:{parsed.port}")


def render_agent_yaml(scope: DeviceScope, *, mqtt_url: str, install_dir: Path,
                      has_ca: bool, has_cert: bool, url_in_env: bool,
                      sync_policy: EffectivePolicy | None = None) -> str:
    """The device's agent YAML. With ``sync_policy`` (the device's effective policy) its
    strategies are written in and ``remote_policy: true`` lets later changes of it reach
    the running agent."""
    tls: dict[str, str] = {}
    if has_ca:
        tls["ca_cert_path"] = str(install_dir / CA_FILE)
    if has_cert:
        tls["client_cert_path"] = str(install_dir / CERT_FILE)
        tls["client_key_path"] = str(install_dir / KEY_FILE)
    mqtt: dict[str, object] = {"keep_alive": "30s", "clean_session": False}
    if tls:
        mqtt["tls"] = tls
    connection: dict[str, object] = {"transport": "mqtt"}
    if url_in_env:  # the URL carries the password: keep it in the 0600 env file
        connection["server_url_env"] = "EDGESYNC_MQTT_URL"
    else:
        connection["server_url"] = mqtt_url
    connection |= {"device_id": scope.device_name, "root_topic": scope.root_topic, "mqtt": mqtt}
    doc = {
        "name": "edgesync-agent",
        "platform": "linux",
        "connection": connection,
        "modules": {"required": ["sqlite-replication"]},
        "security": {"auth_token_env": "EDGESYNC_AUTH_TOKEN", "signed_control": {"enabled": True},
                     "capabilities": {"sqlite-replication": True}},
        "sqlite-replication": {"source_db_path_env": "EDGESYNC_SOURCE_DB_PATH",
                               "state_db_path_env": "EDGESYNC_STATE_DB_PATH",
                               "flush_interval": "5s",
                               # this cloud inflates zstd batches (docs/protocol.md)
                               "compression": Compression.ZSTD.value},
    }
    head = (f"# edgesync agent for device {scope.device_name!r} "
            f"(root topic {scope.root_topic!r}).\n"
            f"# Secrets are in {ENV_FILE}: load it into the service's environment.\n")
    if sync_policy is not None:
        replication: dict[str, Any] = doc["sqlite-replication"]  # type: ignore[assignment]
        replication["remote_policy"] = True
        replication["table_strategies"] = dict(sync_policy.table_strategies)
        wire = sync_policy.wire
        if "compression" in wire:
            replication["compression"] = wire.pop("compression")
        connection.update(wire)  # the budgets it gives
        head += (f"# table_strategies: sync policy {sync_policy.name!r} version "
                 f"{sync_policy.version}; remote_policy: true applies its later changes "
                 f"without a restart (set it false to keep these; docs/agent.md).\n")
    return head + yaml.safe_dump(doc, sort_keys=False)


def _write(path: Path, text: str, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, mode)


def write_bundle(out: Path, scope: DeviceScope, *, mqtt_url: str, control_token: str,
                 certificate: CertificateSecret | None = None,
                 password: PasswordSecret | None = None, broker_ca_pem: str | None = None,
                 install_dir: Path = Path("/etc/edgesync"),
                 source_db_path: str = "/var/lib/myapp/data.db",
                 state_db_path: str = "/var/lib/edgesync/state.db",
                 sync_policy: EffectivePolicy | None = None) -> BundleFiles:
    if (certificate is None) == (password is None):
        raise ConfigError("bundle", "needs exactly one of a certificate or a password")
    if certificate is not None and certificate.key_pem is None:
        raise ConfigError("bundle", "the certificate's private key is needed for a bundle")
    broker = parse_broker_url(mqtt_url, "--mqtt-url")
    if not broker.tls:
        raise ConfigError("--mqtt-url", "device bundles connect over TLS: use ssl:// or mqtts://")
    out.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    if broker_ca_pem:
        _write(out / CA_FILE, broker_ca_pem, 0o644)
        written.append(CA_FILE)
    if certificate is not None:
        assert certificate.key_pem is not None
        _write(out / CERT_FILE, certificate.cert_pem, 0o644)
        _write(out / KEY_FILE, certificate.key_pem, 0o600)
        written += [CERT_FILE, KEY_FILE]
    _write(out / YAML_FILE, render_agent_yaml(
        scope, mqtt_url=mqtt_url, install_dir=install_dir, has_ca=bool(broker_ca_pem),
        has_cert=certificate is not None, url_in_env=password is not None,
        sync_policy=sync_policy), 0o644)
    env = [f"# Environment of the edgesync agent for {scope.device_name} (keep mode 0600)."]
    if password is not None:
        env.append(f"EDGESYNC_MQTT_URL={_url_with_password(mqtt_url, password)}")
    env += [f"EDGESYNC_AUTH_TOKEN={control_token}",
            f"EDGESYNC_SOURCE_DB_PATH={source_db_path}",
            f"EDGESYNC_STATE_DB_PATH={state_db_path}"]
    _write(out / ENV_FILE, "\n".join(env) + "\n", 0o600)
    written += [YAML_FILE, ENV_FILE]
    return BundleFiles(out, tuple(written))
