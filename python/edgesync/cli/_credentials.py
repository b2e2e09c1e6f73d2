"""``edgesync devices credentials|bundle|revoke``, ``edgesync jitr …`` and ``edgesync
broker-config``, on the database directly. Secrets are printed (or written) once; nothing
here can show them again."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgesync._defaults import BOOTSTRAP_DAYS, DEFAULT_API_URL, DEVICE_CERT_DAYS, WORKER_USERNAME
from edgesync.cli._options import server_db_options
from edgesync.errors import ConfigError, NotFoundError

if TYPE_CHECKING:
    import argparse

    from edgesync import fleet
    from edgesync.store import Conn

__all__ = ["CREDENTIAL_DEVICE_ACTIONS", "add_credentials_parsers", "is_credentials_command",
           "run_on_database"]

CREDENTIAL_DEVICE_ACTIONS = ("credentials", "bundle", "revoke")
_SHOWN_ONCE = "edgesync: store these secrets now: they are shown only once\n"
_RELOAD = ("run `edgesync broker-config` again and reload Mosquitto (kill -HUP) so the "
           "broker enforces it")


def add_credentials_parsers(sub: Any, devices_sub: Any) -> None:
    cred = devices_sub.add_parser(
        "credentials", help="issue MQTT credentials (shown once), or list them",
        description="With --password and/or --cert, issue credentials and print the secrets "
                    "once (a new password revokes the previous one). Without, list the "
                    "device's credentials (no secrets).")
    cred.add_argument("name", help="device name")
    cred.add_argument("--project", required=True, help="project name or id")
    cred.add_argument("--password", action="store_true", help="issue an MQTT password")
    cred.add_argument("--cert", action="store_true",
                      help="issue an mTLS client certificate (CN = device name)")
    cred.add_argument("--csr", type=Path, default=None,
                      help="sign this CSR (key made on the device) instead of making a key")
    cred.add_argument("--days", type=int, default=DEVICE_CERT_DAYS,
                      help=f"certificate validity (default {DEVICE_CERT_DAYS})")
    server_db_options(cred)

    bundle = devices_sub.add_parser(
        "bundle", help="write what a device needs: agent YAML, env file, CA, cert and key",
        description="Issue fresh credentials for the device and write agent.yaml, agent.env, "
                    "the broker CA and (for mTLS) device.pem/device.key into --out.")
    bundle.add_argument("name", help="device name")
    bundle.add_argument("--project", required=True, help="project name or id")
    bundle.add_argument("--out", type=Path, required=True, help="directory to write")
    bundle.add_argument("--mqtt-url", default=os.environ.get("EDGESYNC_PUBLIC_MQTT_URL"),
                        help="the broker as devices reach it, ssl://host:port: the project's "
                             "mTLS (or, with --auth password, password) listener "
                             "(env EDGESYNC_PUBLIC_MQTT_URL)")
    bundle.add_argument("--auth", choices=["cert", "password"], default="cert",
                        help="client certificate (default) or username/password")
    bundle.add_argument("--broker-ca", type=Path, default=None,
                        help="CA of the broker's server certificate (default: the server CA "
                             "broker-config issued it from, if any)")
    bundle.add_argument("--install-dir", type=Path, default=Path("/etc/edgesync"),
                        help="where the files go on the device (default /etc/edgesync)")
    bundle.add_argument("--source-db", default="/var/lib/myapp/data.db",
                        help="the application's SQLite file on the device")
    bundle.add_argument("--days", type=int, default=DEVICE_CERT_DAYS)
    server_db_options(bundle)

    revoke = devices_sub.add_parser(
        "revoke", help="revoke a device (or one of its credentials)",
        description="Without --credential: revoke the device — ingest refuses its messages "
                    "and every live credential is revoked (rewrite the broker's files with "
                    "broker-config and reload it). With --credential: revoke only that one.")
    revoke.add_argument("name", help="device name")
    revoke.add_argument("--project", required=True, help="project name or id")
    revoke.add_argument("--credential", type=uuid.UUID, default=None,
                        help="credential id (from `devices credentials NAME`)")
    server_db_options(revoke)

    jitr = sub.add_parser("jitr", help="fleet bootstrap certificates for JITR enrollment",
                          description="Issue, list and revoke fleet bootstrap certificates.")
    jsub = jitr.add_subparsers(dest="jitr_command", required=True, metavar="ACTION")
    issue = jsub.add_parser(
        "issue", help="issue a bootstrap certificate (private key shown once)",
        description="Issue a fleet bootstrap certificate with a device quota. With --out, "
                    "write bootstrap-certificate.pem, bootstrap-private.key.pem, "
                    "bootstrap-ca.pem and jitr.json there instead of printing the PEMs.")
    issue.add_argument("--project", required=True, help="project name or id")
    issue.add_argument("--fleet", required=True, help="fleet name (created when new)")
    issue.add_argument("--quota", type=int, required=True, help="devices it may enroll (1-1000)")
    issue.add_argument("--days", type=int, default=BOOTSTRAP_DAYS,
                       help=f"validity (default {BOOTSTRAP_DAYS})")
    issue.add_argument("--out", type=Path, default=None)
    issue.add_argument("--api-url", default=os.environ.get("EDGESYNC_API_URL", DEFAULT_API_URL),
                       help="API base URL written to jitr.json (env EDGESYNC_API_URL)")
    server_db_options(issue)
    jlist = jsub.add_parser("list", help="list bootstrap certificates",
                            description="List a project's bootstrap certificates.")
    jlist.add_argument("--project", required=True, help="project name or id")
    server_db_options(jlist)
    jrevoke = jsub.add_parser("revoke", help="revoke a bootstrap certificate",
                              description="Stop new enrollments with it; enrolled devices "
                                          "keep working.")
    jrevoke.add_argument("ref", help="bootstrap certificate id or serial")
    jrevoke.add_argument("--project", required=True, help="project name or id")
    server_db_options(jrevoke)

    bc = sub.add_parser(
        "broker-config", help="write a Mosquitto configuration enforcing device credentials",
        description="Write mosquitto.conf, password files, ACLs, device CAs and CRLs into "
                    "--out. Rerun after issuing or revoking credentials, then reload "
                    "Mosquitto (SIGHUP). Each project gets its own mTLS listener (and "
                    "password listener with --password-port) on consecutive free ports.")
    bc.add_argument("--out", type=Path, required=True, help="directory to write")
    bc.add_argument("--project", action="append", default=[],
                    help="project name (repeatable; default: every project)")
    bc.add_argument("--server-cert", type=Path, default=None,
                    help="the broker's TLS certificate (default: issue one from edgesync's "
                         "server CA for --server-name)")
    bc.add_argument("--server-key", type=Path, default=None, help="its private key")
    bc.add_argument("--server-name", action="append", default=[],
                    help="DNS name or IP of the broker for an issued certificate "
                         "(repeatable; default localhost and 127.0.0.1)")
    bc.add_argument("--bind", default="0.0.0.0", help="address of the device listeners")
    bc.add_argument("--mtls-port", type=int, default=8883,
                    help="first port of the per-project mTLS listeners (default 8883)")
    bc.add_argument("--password-port", type=int, default=None,
                    help="first port of per-project password listeners (default: none)")
    bc.add_argument("--worker-port", type=int, default=8884,
                    help="port of the worker's listener (default 8884)")
    bc.add_argument("--worker-bind", default="127.0.0.1",
                    help="address of the worker's listener (default 127.0.0.1)")
    bc.add_argument("--worker-username", default=WORKER_USERNAME)
    bc.add_argument("--rotate-worker-password", action="store_true",
                    help="issue a new worker password (printed once)")
    bc.add_argument("--crl-days", type=int, default=365,
                    help="validity of the CRLs written (default 365); rerun before then")
    bc.add_argument("--persistence-dir", type=Path, default=None,
                    help="enable Mosquitto persistence in this directory")
    bc.add_argument("--extra", action="append", default=[],
                    help="one more global mosquitto.conf line (repeatable), e.g. "
                         "'user mosquitto' or 'log_dest syslog'")
    server_db_options(bc)


def is_credentials_command(args: argparse.Namespace) -> bool:
    return args.command in ("jitr", "broker-config") or (
        args.command == "devices" and args.devices_command in CREDENTIAL_DEVICE_ACTIONS)


async def _project(conn: Conn, name: str) -> Any:
    from edgesync import credentials

    row = await credentials.find_project(conn, name)
    if row is None:
        raise NotFoundError(f"no project named {name!r}")
    return row


async def run_on_database(conn: Conn, args: argparse.Namespace) -> Any:
    from edgesync import credentials, operations

    if args.command == "broker-config":
        return await _broker_config(conn, args)
    if args.command == "jitr":
        return await _jitr(conn, args)
    scope = await credentials.find_device(conn, args.project, args.name)
    if args.devices_command == "revoke":
        # The whole device unless one credential is named: ingest refuses it too.
        revoked = await operations.revoke_device(conn, scope.device_id,
                                                 credential_id=args.credential)
        revoked_at = revoked.revoked_at
        return {"device": scope.device_name, "revoked": revoked.credentials_revoked,
                **({"device_revoked_at": revoked_at} if revoked_at else {}), "next": _RELOAD}
    if args.devices_command == "bundle":
        return await _bundle(conn, scope, args)
    if not (args.password or args.cert or args.csr):
        return await credentials.list_credentials(conn, scope.device_id)
    out: dict[str, Any] = {"device": scope.device_name, "root_topic": scope.root_topic}
    if args.cert or args.csr:
        csr = _read(args.csr, "--csr") if args.csr else None
        cert = await credentials.issue_certificate(conn, scope, csr_pem=csr, days=args.days)
        out["certificate"] = {"credential_id": cert.credential_id, "serial": cert.serial,
                              "not_after": cert.not_after, "certificate_pem": cert.cert_pem,
                              "private_key_pem": cert.key_pem,
                              "device_ca_pem": cert.device_ca_pem}
    if args.password:
        pw = await credentials.issue_password(conn, scope)
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


async def _bundle(conn: Conn, scope: fleet.DeviceScope, args: argparse.Namespace) -> Any:
    from edgesync import credentials

    ca_pem = _read(args.broker_ca, "--broker-ca") if args.broker_ca else None
    issued = await credentials.issue_bundle(conn, scope, args.out, mqtt_url=args.mqtt_url,
                                            auth=args.auth, days=args.days,
                                            broker_ca_pem=ca_pem, install_dir=args.install_dir,
                                            source_db_path=args.source_db)
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
    from edgesync import credentials, fleet

    project = await _project(conn, args.project)
    if args.jitr_command == "list":
        return await credentials.list_bootstraps(conn, project["id"])
    if args.jitr_command == "revoke":
        return {"id": await credentials.revoke_bootstrap(conn, project["id"], args.ref),
                "revoked": True}
    async with conn.transaction():
        fleet_id = await fleet.ensure_fleet(conn, project["id"], args.fleet)
        boot = await credentials.issue_bootstrap(conn, project["id"], fleet_id,
                                                 max_devices=args.quota, days=args.days)
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
    from edgesync import credentials

    opts = credentials.BrokerConfigOptions(
        projects=tuple(args.project), server_cert=args.server_cert, server_key=args.server_key,
        server_names=tuple(args.server_name) or ("localhost", "127.0.0.1"), bind=args.bind,
        mtls_port=args.mtls_port, password_port=args.password_port,
        worker_port=args.worker_port, worker_bind=args.worker_bind,
        worker_username=args.worker_username,
        rotate_worker_password=args.rotate_worker_password, crl_days=args.crl_days,
        persistence_dir=args.persistence_dir, extra=tuple(args.extra))
    result = await credentials.write_broker_config(conn, args.out, opts)
    doc: dict[str, Any] = {
        "config": str(result.files[0]), "listeners": result.listeners,
        "worker": {"port": opts.worker_port, "username": result.worker_username},
        "server_ca": str(result.server_ca) if result.server_ca else None,
        "next": "start mosquitto -c CONFIG, or reload a running one with SIGHUP"}
    if result.worker_password:
        sys.stderr.write(_SHOWN_ONCE)
        doc["worker"]["password"] = result.worker_password
    return doc
