"""Helpers for tests against a real Mosquitto started from the configuration
``edgesync broker-config`` writes: the broker process and a ``Deployment`` (a project,
its broker files, and clients for its devices and its worker)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import shutil
import signal
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiomqtt
import asyncpg

from edgesync import credentials, fleet
from edgesync.credentials import BrokerConfigOptions, BrokerConfigResult, CertificateSecret
from edgesync.fleet import DeviceScope
from edgesync.protocol import BrokerUrl, TlsFiles, mqtt_client

MOSQUITTO = "/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else (
    shutil.which("mosquitto") or "mosquitto")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Mosquitto:
    """One mosquitto process; ``reload`` sends SIGHUP and waits until it was handled."""

    def __init__(self, conf: Path, log: Path) -> None:
        self.conf, self.log = conf, log
        self.proc: asyncio.subprocess.Process | None = None

    def _log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    async def start(self, ports: list[int]) -> None:
        before = self._log_text().count(" running")
        with self.log.open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(
                MOSQUITTO, "-c", str(self.conf), stdout=out, stderr=out)

        async def listening() -> bool:
            assert self.proc is not None
            if self.proc.returncode is not None:
                raise AssertionError(f"mosquitto exited:\n{self._log_text()}")
            try:
                for port in ports:
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                    writer.close()
                    await writer.wait_closed()
            except OSError:
                return False
            return True

        await until(listening)

        # Listening is not enough: Mosquitto opens its sockets before it installs its
        # signal handlers, and a SIGHUP in between ends it (seen once under load: a
        # reload right after start waited for ever). It logs "running" after both.
        async def running() -> bool:
            return self._log_text().count(" running") > before

        await until(running)

    async def reload(self) -> None:
        assert self.proc is not None
        before = self._log_text().count("Reloading config.")
        self.proc.send_signal(signal.SIGHUP)

        async def reloaded() -> bool:
            assert self.proc is not None
            if self.proc.returncode is not None:
                raise AssertionError(f"mosquitto exited on SIGHUP:\n{self._log_text()}")
            return self._log_text().count("Reloading config.") > before

        # Mosquitto reloads in its single network thread right after logging this line,
        # so from then on no new connection is served with the old files.
        await until(reloaded)

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            await self.proc.wait()


async def until(probe: Callable[[], Awaitable[bool]], limit: float = 30.0) -> None:
    """Poll ``probe`` until true; the timeout is a safety net, not an assertion on time."""
    async with asyncio.timeout(limit):
        for _ in itertools.count():
            if await probe():
                return
            await asyncio.sleep(0.05)


@dataclass
class Deployment:
    """A project, its broker config and a running broker."""

    pool: asyncpg.Pool
    out: Path
    project: str
    slug: str
    opts: BrokerConfigOptions
    broker: Mosquitto
    result: BrokerConfigResult | None = None
    worker_password: str = ""
    certs: dict[str, CertificateSecret] = field(default_factory=dict)
    passwords: dict[str, str] = field(default_factory=dict)
    tmp: Path = Path()
    _n: int = 0

    @property
    def server_ca(self) -> Path:
        return self.out / "server-ca.pem"

    @property
    def mtls_url(self) -> BrokerUrl:
        return BrokerUrl("127.0.0.1", self.opts.mtls_port, tls=True)

    @property
    def password_url(self) -> BrokerUrl:
        assert self.opts.password_port is not None
        return BrokerUrl("127.0.0.1", self.opts.password_port, tls=True)

    @property
    def worker_url(self) -> BrokerUrl:
        return BrokerUrl("127.0.0.1", self.opts.worker_port, tls=True)

    def topic(self, device: str, kind: str) -> str:
        return f"{self.slug}/{device}/{kind}"

    async def add_device(self, name: str, *, cert: bool = True,
                         password: bool = True) -> DeviceScope:
        async with self.pool.acquire() as conn:
            scope = await fleet.add_device(conn, project=self.project, name=name,
                                           topic_slug=self.slug, fleet="fleet")
            if cert:
                self.certs[name] = await credentials.issue_certificate(conn, scope)
            if password:
                self.passwords[name] = (await credentials.issue_password(conn, scope)).password
        return scope

    async def write_config(self) -> BrokerConfigResult:
        async with self.pool.acquire() as conn:
            self.result = await credentials.write_broker_config(conn, self.out, self.opts)
        if self.result.worker_password:
            self.worker_password = self.result.worker_password
        return self.result

    async def start(self) -> None:
        await self.write_config()
        assert self.opts.password_port is not None
        await self.broker.start([self.opts.worker_port, self.opts.mtls_port,
                                 self.opts.password_port])

    async def apply(self) -> None:
        """Rewrite the broker files from the database and reload the broker."""
        await self.write_config()
        await self.broker.reload()

    def key_files(self, name: str, cert_pem: str, key_pem: str) -> TlsFiles:
        self._n += 1
        cert, key = self.tmp / f"{name}-{self._n}.pem", self.tmp / f"{name}-{self._n}.key"
        cert.write_text(cert_pem)
        key.write_text(key_pem)
        return TlsFiles(self.server_ca, cert, key)

    def device_mtls(self, name: str, *, client_id: str | None = None) -> aiomqtt.Client:
        secret = self.certs[name]
        assert secret.key_pem is not None
        return mqtt_client(self.mtls_url, identifier=client_id or name, clean_session=True,
                           tls=self.key_files(name, secret.cert_pem, secret.key_pem))

    def device_password(self, name: str, *, password: str | None = None,
                        client_id: str | None = None) -> aiomqtt.Client:
        return mqtt_client(self.password_url, identifier=client_id or name, clean_session=True,
                           tls=TlsFiles(self.server_ca), username=name,
                           password=password or self.passwords[name])

    async def mtls_accepts(self, cert_pem: str, key_pem: str) -> bool:
        """Whether the mTLS listener completes a handshake with this certificate. TLS 1.2,
        where the server checks the client certificate inside the handshake, makes a
        refusal immediate (with TLS 1.3 a client only notices when no CONNACK comes)."""
        ctx = self.key_files("probe", cert_pem, key_pem).context()
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", self.opts.mtls_port,
                                                      ssl=ctx)
        except (ssl.SSLError, ConnectionResetError):
            return False
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return True

    @staticmethod
    async def next_message(client: aiomqtt.Client) -> aiomqtt.Message:
        # A safety net against a hung test, not a timing assertion.
        async with asyncio.timeout(20):
            return await anext(client.messages)

    def worker(self, client_id: str = "edgesync-worker-test") -> aiomqtt.Client:
        return mqtt_client(self.worker_url, identifier=client_id, clean_session=True,
                           tls=TlsFiles(self.server_ca), username=self.opts.worker_username,
                           password=self.worker_password)
