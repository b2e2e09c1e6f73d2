"""Servers a fault test owns: a PostgreSQL cluster (initdb, pg_ctl) and a Mosquitto it
may restart, stop or kill, never the shared 5432/1883 the rest of the suite uses."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from kits.e2e_kit import eventually

PG_BIN = sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1:]
MOSQUITTO = "/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else (
    shutil.which("mosquitto") or "mosquitto")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def run(*cmd: str, log: Path) -> None:
    """A command, without blocking the event loop the server's loops run on. Its output
    goes to a file, not a pipe: a server it starts inherits it and never closes it."""
    with log.open("ab") as out:
        proc = await asyncio.create_subprocess_exec(*cmd, stdout=out, stderr=out)
        await proc.wait()
    assert proc.returncode == 0, f"{' '.join(cmd)}:\n{tail(log)}"


def tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:] if path.exists() else ""


class Cluster:
    """A PostgreSQL cluster of the test's own (initdb, pg_ctl), as user ``postgres``
    when we are root (PostgreSQL refuses to run as root)."""

    def __init__(self, root: Path) -> None:
        assert PG_BIN, "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin"
        self.bin = PG_BIN[0]
        self.root = root
        self.data = root / "data"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._as: list[str] = []
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(root, owner.pw_uid, owner.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]

    async def _ctl(self, *args: str) -> None:
        await run(*self._as, str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60",
                  "-l", str(self.root / "postgres.log"), *args, log=self.root / "pg_ctl.log")

    async def start(self) -> None:
        await run(*self._as, str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres",
                  "-A", "trust", "-E", "UTF8", "--no-sync", log=self.root / "initdb.log")
        await self._start()

    async def _start(self) -> None:
        await self._ctl("-o", f"-p {self.port} -c listen_addresses=127.0.0.1 "
                        f"-k {self.root} -c fsync=off -c max_connections=60", "start")

    async def restart(self) -> None:
        await self._ctl("-m", "fast", "restart")  # the options of the start are kept

    async def outage(self, seconds: float) -> None:
        """Down for ``seconds``: longer than any loop's interval, so each meets it."""
        await self._ctl("-m", "fast", "stop")
        await asyncio.sleep(seconds)
        await self._start()

    async def stop(self) -> None:
        with contextlib.suppress(AssertionError):
            await self._ctl("-m", "immediate", "stop")


class Broker:
    """A Mosquitto of the test's own; ``restart`` stops it and starts it on the same port."""

    def __init__(self, root: Path) -> None:
        self.port = free_port()
        self.url = f"mqtt://127.0.0.1:{self.port}"
        self.conf = root / "mosquitto.conf"
        self.log = root / "mosquitto.log"
        self.conf.write_text(f"listener {self.port} 127.0.0.1\nallow_anonymous true\n"
                             "max_inflight_messages 0\nmax_queued_messages 0\n"
                             f"persistence true\npersistence_location {root}/\n")
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(MOSQUITTO, "-c", str(self.conf),
                                                             stdout=out, stderr=out)

        async def listening() -> bool:
            assert self.proc is not None and self.proc.returncode is None, tail(self.log)
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                return False
            writer.close()
            await writer.wait_closed()
            return True

        await eventually(listening, 30, "mosquitto listening")

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            await self.proc.wait()

    async def restart(self) -> None:
        await self.stop()
        await self.start()


@contextlib.asynccontextmanager
async def servers() -> AsyncIterator[tuple[Cluster, Broker, Path]]:
    root = Path(tempfile.mkdtemp(prefix="edgesync-faults-"))
    os.chmod(root, 0o755)
    cluster, broker = Cluster(root), Broker(root)
    try:
        await cluster.start()
        await broker.start()
        yield cluster, broker, root
    finally:
        await broker.stop()
        await cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


