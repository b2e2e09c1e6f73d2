"""Issuing a device bundle (``edgesync devices bundle`` and ``POST
/devices/{id}/bundle``): fresh credentials, the control token, the broker CA and the
device's effective sync policy, written into a directory in one transaction."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from edgesync import syncpolicy
from edgesync.credentials._authorities import server_ca
from edgesync.credentials._bundle import BundleFiles, write_bundle
from edgesync.credentials._control_token import ensure_control_token
from edgesync.credentials._device_credentials import issue_certificate, issue_password
from edgesync.errors import ConfigError
from edgesync.fleet import DeviceScope
from edgesync.store import Conn

__all__ = ["IssuedBundle", "issue_bundle"]


@dataclass(frozen=True, slots=True)
class IssuedBundle:
    files: BundleFiles
    credential_id: uuid.UUID
    broker_ca_included: bool
    sync_policy: syncpolicy.EffectivePolicy | None  # the one written into agent.yaml


async def issue_bundle(conn: Conn, scope: DeviceScope, out: Path, *, mqtt_url: str | None,
                       auth: Literal["cert", "password"] = "cert", days: int,
                       broker_ca_pem: str | None = None,
                       install_dir: Path = Path("/etc/edgesync"),
                       source_db_path: str = "/var/lib/myapp/data.db",
                       mqtt_url_field: str = "--mqtt-url") -> IssuedBundle:
    if not mqtt_url:
        raise ConfigError(mqtt_url_field, "required (or set EDGESYNC_PUBLIC_MQTT_URL)")
    ca_pem = broker_ca_pem
    if ca_pem is None and await conn.fetchval(
            "SELECT 1 FROM edge_certificate_authorities WHERE purpose = 'server'"):
        ca_pem = (await server_ca(conn)).cert_pem
    async with conn.transaction():
        token = await ensure_control_token(conn, scope.device_id)
        policy = await syncpolicy.effective_policy(conn, scope.device_id)
        cert = pw = None
        if auth == "cert":
            cert = await issue_certificate(conn, scope, days=days)
            credential_id = cert.credential_id
        else:
            pw = await issue_password(conn, scope)
            credential_id = pw.credential_id
        files = write_bundle(out, scope, mqtt_url=mqtt_url, control_token=token,
                             certificate=cert, password=pw, broker_ca_pem=ca_pem,
                             install_dir=install_dir, source_db_path=source_db_path,
                             sync_policy=policy)
    return IssuedBundle(files, credential_id, bool(ca_pem), policy)
