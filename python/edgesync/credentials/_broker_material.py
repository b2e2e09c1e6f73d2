"""Everything the broker must know about credentials, gathered from the database and
written as a Mosquitto configuration (``edgesync broker-config``): device CAs, CRLs,
password files, the worker account, and — unless the operator brings one — a broker
server certificate signed by the deployment's server CA."""

from __future__ import annotations

import json
import os
import re
import signal
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgesync._defaults import WORKER_USERNAME
from edgesync.broker import MosquittoConfig, ProjectListeners, write_mosquitto_config
from edgesync.credentials._authorities import get_ca, next_crl_number, server_ca
from edgesync.credentials._passwords import hash_password, new_password
from edgesync.credentials._x509 import CaMaterial, build_crl, issue_leaf, new_key, private_key_pem
from edgesync.errors import ConfigError, NotFoundError
from edgesync.store import Conn

__all__ = ["WORKER_USERNAME", "BrokerConfigOptions", "BrokerConfigResult", "BrokerRefresh",
           "write_broker_config"]

# The options a configuration was written with, so ``edgesync serve --broker-config-out``
# can write it again the same way after an API revocation (BrokerRefresh.from_dir).
OPTIONS_FILE = "edgesync-broker-options.json"

# A broker username: no wildcards, separators or spaces (it lands in the ACL and passwd files).
_ACCOUNT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@dataclass(frozen=True, slots=True)
class BrokerConfigOptions:
    projects: Sequence[str] = ()  # project names; empty = every project
    server_cert: Path | None = None
    server_key: Path | None = None
    server_names: Sequence[str] = ("localhost", "127.0.0.1")
    bind: str = "0.0.0.0"
    mtls_port: int = 8883
    password_port: int | None = None
    worker_port: int = 8884
    worker_bind: str = "127.0.0.1"
    worker_username: str = WORKER_USERNAME
    rotate_worker_password: bool = False
    crl_days: int = 365
    persistence_dir: Path | None = None
    extra: Sequence[str] = ()  # more global mosquitto.conf lines (e.g. "user mosquitto")


@dataclass(frozen=True, slots=True)
class BrokerConfigResult:
    files: list[Path]
    listeners: list[dict[str, Any]]
    worker_username: str
    worker_password: str | None  # only when just created or rotated: shown once
    server_ca: Path | None  # the CA devices trust, when the server cert was issued here


async def _worker_account(conn: Conn, username: str, rotate: bool) -> tuple[str, str | None]:
    digest = await conn.fetchval(
        "SELECT password_hash FROM edge_broker_accounts WHERE username = $1", username)
    if digest is not None and not rotate:
        return str(digest), None
    password = new_password()
    digest = hash_password(password)
    await conn.execute(
        "INSERT INTO edge_broker_accounts (username, password_hash) VALUES ($1, $2) "
        "ON CONFLICT (username) DO UPDATE SET password_hash = EXCLUDED.password_hash, "
        "rotated_at = now()", username, digest)
    return digest, password


async def _projects(conn: Conn, names: Sequence[str]) -> list[Any]:
    rows = await conn.fetch(
        "SELECT id, name, topic_slug FROM edge_projects "
        "WHERE cardinality($1::text[]) = 0 OR name = ANY($1::text[]) ORDER BY created_at, id",
        list(names))
    missing = set(names) - {r["name"] for r in rows}
    if missing:
        raise NotFoundError(f"no project named {sorted(missing)}")
    return list(rows)


async def _crl(conn: Conn, project_id: uuid.UUID, ca: CaMaterial, days: int) -> str:
    revoked = await conn.fetch(
        "SELECT c.cert_serial, c.revoked_at FROM edge_device_credentials c "
        "JOIN edge_devices d ON d.id = c.device_id WHERE d.project_id = $1 "
        "AND c.kind = 'certificate' AND c.revoked_at IS NOT NULL ORDER BY c.revoked_at",
        project_id)
    number = await next_crl_number(conn, project_id)
    return build_crl(ca, [(r["cert_serial"], r["revoked_at"]) for r in revoked],
                     number=number, days=days)


async def _passwords(conn: Conn, project_id: uuid.UUID) -> list[tuple[str, str]]:
    rows = await conn.fetch(
        "SELECT d.name, c.password_hash FROM edge_device_credentials c "
        "JOIN edge_devices d ON d.id = c.device_id WHERE d.project_id = $1 "
        "AND c.kind = 'password' AND c.revoked_at IS NULL ORDER BY d.name", project_id)
    return [(r["name"], r["password_hash"]) for r in rows]


def _port(base: int, used: set[int]) -> int:
    port = base
    while port in used:
        port += 1
    if port > 65535:
        raise ConfigError("ports", f"no free listener port from {base}")
    used.add(port)
    return port


def _write_secret(path: Path, text: str, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, mode)


def _own_server_cert(opts: BrokerConfigOptions) -> tuple[Path, Path]:
    if not (opts.server_cert and opts.server_key):
        raise ConfigError("--server-cert", "give both --server-cert and --server-key")
    for p in (opts.server_cert, opts.server_key):
        if not p.is_file():
            raise ConfigError("--server-cert", f"file {str(p)!r} does not exist")
    return opts.server_cert.resolve(), opts.server_key.resolve()


def _write_server_files(out: Path, cert_pem: str, key_pem: str, ca_pem: str
                        ) -> tuple[Path, Path, Path]:
    cert_path, key_path, ca_path = out / "server.pem", out / "server.key", out / "server-ca.pem"
    _write_secret(cert_path, cert_pem, 0o644)
    _write_secret(key_path, key_pem, 0o600)
    _write_secret(ca_path, ca_pem, 0o644)
    return cert_path.resolve(), key_path.resolve(), ca_path.resolve()


async def _server_cert(conn: Conn, out: Path, opts: BrokerConfigOptions
                       ) -> tuple[Path, Path, Path | None]:
    """The operator's server certificate, or one issued here for ``server_names``."""
    if opts.server_cert or opts.server_key:
        return (*_own_server_cert(opts), None)
    ca = await server_ca(conn)
    key = new_key()
    names = list(opts.server_names)
    issued = issue_leaf(ca, key.public_key(), names[0], days=397, client=False,
                        dns_names=names)
    return _write_server_files(out, issued.cert_pem, private_key_pem(key), ca.cert_pem)


async def write_broker_config(conn: Conn, out: Path,
                              opts: BrokerConfigOptions | None = None) -> BrokerConfigResult:
    opts = opts or BrokerConfigOptions()
    if not _ACCOUNT.match(opts.worker_username):
        raise ConfigError("--worker-username", f"{opts.worker_username!r} must match "
                                               f"{_ACCOUNT.pattern}")
    async with conn.transaction():
        worker_hash, worker_password = await _worker_account(
            conn, opts.worker_username, opts.rotate_worker_password)
        cert, key, ca_path = await _server_cert(conn, out, opts)
        used = {opts.worker_port}
        listeners: list[ProjectListeners] = []
        for row in await _projects(conn, opts.projects):
            device_ca = await get_ca(conn, row["id"], "device")
            listeners.append(ProjectListeners(
                project_id=str(row["id"]), name=row["name"], slug=row["topic_slug"],
                mtls_port=_port(opts.mtls_port, used),
                password_port=(_port(opts.password_port, used)
                               if opts.password_port is not None else None),
                device_ca_pem=device_ca.cert_pem,
                crl_pem=await _crl(conn, row["id"], device_ca, opts.crl_days),
                passwords=await _passwords(conn, row["id"])))
    cfg = MosquittoConfig(
        server_cert=cert, server_key=key, worker_username=opts.worker_username,
        worker_password_hash=worker_hash, projects=listeners, bind=opts.bind,
        worker_port=opts.worker_port, worker_bind=opts.worker_bind,
        persistence_dir=opts.persistence_dir, extra=tuple(opts.extra))
    files = write_mosquitto_config(cfg, out)
    _write_secret(out / OPTIONS_FILE, _options_json(opts), 0o600)
    summary = [{"project": p.name, "topic_slug": p.slug, "mtls_port": p.mtls_port,
                "password_port": p.password_port} for p in listeners]
    return BrokerConfigResult(files, summary, opts.worker_username, worker_password, ca_path)


def _options_json(opts: BrokerConfigOptions) -> str:
    doc = {k: (str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple | list)
               else v) for k, v in ((f, getattr(opts, f)) for f in opts.__dataclass_fields__)}
    doc["rotate_worker_password"] = False  # a rewrite keeps the worker's password
    return json.dumps(doc, indent=2)


def _options_from(path: Path) -> BrokerConfigOptions:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError("--broker-config-out", f"cannot read {path} (write the broker's "
                                                 f"files with `edgesync broker-config` "
                                                 f"first): {exc}") from exc
    paths = {"server_cert", "server_key", "persistence_dir"}
    values: dict[str, Any] = {k: (Path(v) if k in paths and v is not None
                                  else tuple(v) if isinstance(v, list) else v)
                              for k, v in doc.items()
                              if k in BrokerConfigOptions.__dataclass_fields__}
    return BrokerConfigOptions(**values)


@dataclass(frozen=True, slots=True)
class BrokerRefresh:
    """Keeps a Mosquitto's files in step with the database after a revocation made
    through the API (``edgesync serve --broker-config-out DIR``): the files are written
    again into ``out`` and ``reload`` makes the broker read them (default: SIGHUP to the
    pid in ``pid_file``)."""

    out: Path
    options: BrokerConfigOptions = BrokerConfigOptions()
    pid_file: Path | None = None
    reload: Callable[[], Awaitable[None]] | None = None

    @classmethod
    def from_dir(cls, out: Path, pid_file: Path | None = None) -> BrokerRefresh:
        """For the directory ``edgesync broker-config --out`` wrote: the same options."""
        return cls(out, _options_from(out / OPTIONS_FILE), pid_file)

    async def __call__(self, conn: Conn) -> str:
        await write_broker_config(conn, self.out, self.options)
        if self.reload is not None:
            await self.reload()
            return f"broker files rewritten in {self.out} and the broker reloaded"
        if self.pid_file is None:
            return f"broker files rewritten in {self.out}; reload the broker (SIGHUP)"
        try:
            os.kill(int(self.pid_file.read_text().strip()), signal.SIGHUP)
        except (OSError, ValueError) as exc:
            return (f"broker files rewritten in {self.out}, but the broker could not be "
                    f"signalled ({self.pid_file}: {exc}); reload it (SIGHUP)")
        return f"broker files rewritten in {self.out} and the broker sent SIGHUP"
