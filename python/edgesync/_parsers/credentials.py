"""Parsers of ``edgesync devices credentials|bundle|revoke``, ``edgesync jitr …`` and
``edgesync broker-config``; the commands are ``edgesync.credentials._cli``."""

from __future__ import annotations

import argparse
import os
import uuid
from pathlib import Path
from typing import Any

from edgesync._defaults import BOOTSTRAP_DAYS, DEFAULT_API_URL, DEVICE_CERT_DAYS, WORKER_USERNAME

__all__ = ["CREDENTIAL_DEVICE_ACTIONS", "add_credentials_parsers", "is_credentials_command"]

CREDENTIAL_DEVICE_ACTIONS = ("credentials", "bundle", "revoke")


def add_credentials_parsers(sub: Any, devices_sub: Any, db_options: Any) -> None:
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
    db_options(cred)

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
    db_options(bundle)

    revoke = devices_sub.add_parser(
        "revoke", help="revoke a device (or one of its credentials)",
        description="Without --credential: revoke the device — ingest refuses its messages "
                    "and every live credential is revoked (rewrite the broker's files with "
                    "broker-config and reload it). With --credential: revoke only that one.")
    revoke.add_argument("name", help="device name")
    revoke.add_argument("--project", required=True, help="project name or id")
    revoke.add_argument("--credential", type=uuid.UUID, default=None,
                        help="credential id (from `devices credentials NAME`)")
    db_options(revoke)

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
    db_options(issue)
    jlist = jsub.add_parser("list", help="list bootstrap certificates",
                            description="List a project's bootstrap certificates.")
    jlist.add_argument("--project", required=True, help="project name or id")
    db_options(jlist)
    jrevoke = jsub.add_parser("revoke", help="revoke a bootstrap certificate",
                              description="Stop new enrollments with it; enrolled devices "
                                          "keep working.")
    jrevoke.add_argument("ref", help="bootstrap certificate id or serial")
    jrevoke.add_argument("--project", required=True, help="project name or id")
    db_options(jrevoke)

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
    db_options(bc)


def is_credentials_command(args: argparse.Namespace) -> bool:
    return args.command in ("jitr", "broker-config") or (
        args.command == "devices" and args.devices_command in CREDENTIAL_DEVICE_ACTIONS)
