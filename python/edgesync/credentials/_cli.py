"""CLI: ``edgesync devices credentials|bundle|revoke``, ``edgesync jitr …`` and
``edgesync broker-config``. Secrets are printed (or written) once; nothing here can show
them again."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from edgesync import registry
from edgesync.credentials._bootstrap import (
    issue_bootstrap,
    list_bootstraps,
    revoke_bootstrap,
)
from edgesync.credentials._broker_material import (
    BrokerConfigOptions,
    write_broker_config,
)
from edgesync.credentials._device_credentials import (
    find_device,
    find_project,
    issue_certificate,
    issue_password,
    list_credentials,
)
from edgesync.credentials._issue_bundle import issue_bundle
from edgesync.errors import ConfigError, NotFoundError
from edgesync.store import Conn

__all__ = ["credentials_command"]
_SHOWN_ONCE = "edgesync: store these secrets now: they are shown only once\n"
_RELOAD = ("run `edgesync broker-config` again and reload Mosquitto (kill -HUP) so the "
           "broker enforces it")


async def _project(conn: Conn, name: str) -> Any:
    row = await find_project(conn, name)
    if row is None:
        raise NotFoundError(f"no project named {name!r}")
    return row


async def credentials_command(conn: Conn, args: argparse.Namespace) -> Any:
    if args.command == "broker-config":
        return await _broker_config(conn, args)
    if args.command == "jitr":
        return await _jitr(conn, args)
    scope = await find_device(conn, args.project, args.name)
    if args.devices_command == "revoke":
        from edgesync import operations

        # The whole device unless one credential is named: ingest refuses it too.
        revoked = await operations.revoke_device(conn, scope.device_id,
                                                 credential_id=args.credential)
        revoked_at = revoked.revoked_at
        return {"device": scope.device_name, "revoked": revoked.credentials_revoked,
                **({"device_revoked_at": revoked_at} if revoked_at else {}), "next": _RELOAD}
    if args.devices_command == "bundle":
        return await _bundle(conn, scope, args)
    if not (args.password or args.cert or args.csr):
        return await list_credentials(conn, scope.device_id)
    out: dict[str, Any] = {"device": scope.device_name, "root_topic": scope.root_topic}
    if args.cert or args.csr:
        csr = _read(args.csr, "--csr") if args.csr else None
        cert = await issue_certificate(conn, scope, csr_pem=csr, days=args.days)
        out["certificate"] = {"credential_id": cert.credential_id, "serial": cert.serial,
                              "not_after": cert.not_after, "certificate_pem": cert.cert_pem,
                              "private_key_pem": cert.key_pem,
                              "device_ca_pem": cert.device_ca_pem}
    if args.password:
        pw = await issue_password(conn, scope)
        out["password"] = {"credential_id": pw.credential_id, "username": pw.username,
                           "password": pw.password}
    out["next"] = _RELOAD
    sys.stderr.write(_SHOWN_ONCE)
    return out


def _read(path: Path, field: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(field, f"cannot read {path}: {exc.strerror or exc}") from exc


async def _bundle(conn: Conn, scope: registry.DeviceScope, args: argparse.Namespace) -> Any:
    ca_pem = _read(args.broker_ca, "--broker-ca") if args.broker_ca else None
    issued = await issue_bundle(conn, scope, args.out, mqtt_url=args.mqtt_url, auth=args.auth,
                                days=args.days, broker_ca_pem=ca_pem,
                                install_dir=args.install_dir, source_db_path=args.source_db)
    return {"device": scope.device_name, "root_topic": scope.root_topic,
            "directory": str(issued.files.directory), "files": list(issued.files.files),
            "credential_id": issued.credential_id,
            "broker_ca": ("included" if issued.broker_ca_included
                          else "none: the device uses its system CAs"),
            "sync_policy": (f"{issued.sync_policy.name} version "
                            f"{issued.sync_policy.version} (attached to the "
                            f"{issued.sync_policy.attached_via})" if issued.sync_policy
                            else "none attached: the agent replicates every table as rows"),
            "next": _RELOAD}


async def _jitr(conn: Conn, args: argparse.Namespace) -> Any:
    project = await _project(conn, args.project)
    if args.jitr_command == "list":
        return await list_bootstraps(conn, project["id"])
    if args.jitr_command == "revoke":
        return {"id": await revoke_bootstrap(conn, project["id"], args.ref), "revoked": True}
    async with conn.transaction():
        fleet_id = await registry.ensure_fleet(conn, project["id"], args.fleet)
        boot = await issue_bootstrap(conn, project["id"], fleet_id, max_devices=args.quota,
                                     days=args.days)
    doc: dict[str, Any] = {"id": boot.id, "serial": boot.serial, "project_id": boot.project_id,
                           "fleet_id": boot.fleet_id, "org_id": project["org_id"],
                           "max_devices": boot.max_devices, "not_after": boot.not_after,
                           "enroll_url": f"{args.api_url.rstrip('/')}/core/api/v1/projects/"
                                         f"{boot.project_id}/jitr/enroll"}
    if args.out is None:
        sys.stderr.write(_SHOWN_ONCE)
        return doc | {"certificate_pem": boot.cert_pem, "private_key_pem": boot.key_pem,
                      "ca_pem": boot.ca_pem}
    _write_bootstrap_files(args.out, boot.cert_pem, boot.key_pem, boot.ca_pem, doc)
    return doc | {"directory": str(args.out)}


def _write_bootstrap_files(out: Path, cert: str, key: str, ca: str, doc: dict[str, Any]) -> None:
    import orjson

    out.mkdir(parents=True, exist_ok=True)
    for name, text, mode in (("bootstrap-certificate.pem", cert, 0o644),
                             ("bootstrap-private.key.pem", key, 0o600),
                             ("bootstrap-ca.pem", ca, 0o644),
                             ("jitr.json", orjson.dumps(doc, default=str,
                                                        option=orjson.OPT_INDENT_2).decode(),
                              0o644)):
        path = out / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)


async def _broker_config(conn: Conn, args: argparse.Namespace) -> Any:
    opts = BrokerConfigOptions(
        projects=tuple(args.project), server_cert=args.server_cert, server_key=args.server_key,
        server_names=tuple(args.server_name) or ("localhost", "127.0.0.1"), bind=args.bind,
        mtls_port=args.mtls_port, password_port=args.password_port,
        worker_port=args.worker_port, worker_bind=args.worker_bind,
        worker_username=args.worker_username,
        rotate_worker_password=args.rotate_worker_password, crl_days=args.crl_days,
        persistence_dir=args.persistence_dir, extra=tuple(args.extra))
    result = await write_broker_config(conn, args.out, opts)
    doc: dict[str, Any] = {
        "config": str(result.files[0]), "listeners": result.listeners,
        "worker": {"port": opts.worker_port, "username": result.worker_username},
        "server_ca": str(result.server_ca) if result.server_ca else None,
        "next": "start mosquitto -c CONFIG, or reload a running one with SIGHUP"}
    if result.worker_password:
        sys.stderr.write(_SHOWN_ONCE)
        doc["worker"]["password"] = result.worker_password
    return doc
