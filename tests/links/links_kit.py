"""The rig of the bad-link tests: a private Mosquitto, ``edgesync serve`` and
``edgesync agent`` as real processes, the agent inside a network namespace of the test's
own (a veth pair, optionally rate-shaped by ``tc … tbf`` on both ends) reaching the broker
only through a ``LinkProxy``; the worker reaches it through another one. An application
writes on the device's SQLite throughout (state rows inserted and updated, telemetry
appended), and the cloud is compared with SQLite row for row.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from kits.e2e_kit import (
    Device,
    Row,
    app,
    approve,
    eventually,
    register,
    sqlite_rows,
    state_rows,
    target_of,
    ts_rows,
    utc,
    wait_rows,
)
from kits.fault_kit import Broker, tail
from kits.link_proxy import LinkProxy

EDGESYNC = shutil.which("edgesync", path=str(Path(sys.executable).parent)) or "edgesync"
STATE = ["id", "n", "label", "x"]
TELEMETRY = ["seq", "v"]
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: creates a network namespace, a veth pair and tc qdiscs")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs `{tool}` (iproute2)")


def sh(*cmd: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{' '.join(cmd)}: {done.stderr.strip()}"


@dataclass
class Namespace:
    host: str  # the host's end, where the agent's LinkProxy listens
    inside: list[str]  # the command prefix that runs a program inside
    shaped: list[list[str]]  # the interfaces under tbf, with the prefix that reaches them

    def shaping(self) -> str:
        """What each token bucket passed and held back (``tc -s``): proof the traffic
        went through them."""
        out = []
        for *prefix, dev in self.shaped:
            done = subprocess.run([*prefix, "tc", "-s", "qdisc", "show", "dev", dev],
                                  capture_output=True, text=True, check=True)
            sent = next((line.strip() for line in done.stdout.splitlines()
                         if line.strip().startswith("Sent")), "?")
            out.append(f"{dev}: {sent}")
        return "; ".join(out)

    def unshape(self) -> None:
        """The rate limit lifted on both ends."""
        for *prefix, dev in self.shaped:
            sh(*prefix, "tc", "qdisc", "del", "dev", dev, "root")
        self.shaped = []


@contextlib.contextmanager
def namespace(unique: str, rate_kbit: int | None) -> Iterator[Namespace]:
    """A network namespace joined to the host by a veth pair (host 10.X.Y.1, namespace
    10.X.Y.2); with ``rate_kbit`` both ends are shaped by a token bucket (each way).
    """
    n = int(unique, 16)
    net = f"10.{200 + n % 50}.{(n >> 8) % 256}"
    name, host_if, ns_if = f"esl-{unique}", f"esh{unique[:8]}", f"esn{unique[:8]}"
    inside = ["ip", "netns", "exec", name]
    sh("ip", "netns", "add", name)
    try:
        sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        sh("ip", "link", "set", ns_if, "netns", name)
        sh("ip", "addr", "add", f"{net}.1/30", "dev", host_if)
        sh("ip", "link", "set", host_if, "up")
        sh(*inside, "ip", "addr", "add", f"{net}.2/30", "dev", ns_if)
        sh(*inside, "ip", "link", "set", ns_if, "up")
        sh(*inside, "ip", "link", "set", "lo", "up")
        if rate_kbit is not None:
            tbf = ["root", "tbf", "rate", f"{rate_kbit}kbit", "burst", "4kb",
                   "latency", "2s"]
            sh("tc", "qdisc", "add", "dev", host_if, *tbf)
            sh(*inside, "tc", "qdisc", "add", "dev", ns_if, *tbf)
        yield Namespace(f"{net}.1", inside,
                        [[host_if], [*inside, ns_if]] if rate_kbit is not None else [])
    finally:
        subprocess.run(["ip", "link", "del", host_if], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


# ------------------------------------------------------------------ the application

def create_tables(db: Path) -> None:
    app(db, "CREATE TABLE st (id INTEGER PRIMARY KEY, n INTEGER, label TEXT, x REAL)",
        "CREATE TABLE tm (ts TEXT NOT NULL, seq INTEGER, v REAL)",
        "INSERT INTO st VALUES (0, 0, 'seed', 0.0)",
        f"INSERT INTO tm VALUES ('{T0.isoformat()}', 0, 0.0)")


@dataclass
class Writer:
    """The device's application: every ``pause`` seconds a transaction that inserts or
    updates a state row and appends a telemetry sample, until stopped. ``rows``: the
    row changes it made (what the agent has to carry)."""
    db: Path
    pause: float = 0.05
    rows: int = 0
    errors: list[BaseException] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True, name="links.writer")
        self._thread.start()

    def _run(self) -> None:
        rnd = random.Random(29)
        db = sqlite3.connect(self.db, isolation_level=None)
        db.execute("PRAGMA busy_timeout = 5000")
        next_id = int(db.execute("SELECT max(id) FROM st").fetchone()[0]) + 1
        seq = int(db.execute("SELECT max(seq) FROM tm").fetchone()[0]) + 1
        try:
            while not self._stop.is_set():
                db.execute("BEGIN")
                if rnd.random() < 0.6 or next_id < 5:
                    db.execute("INSERT INTO st VALUES (?, ?, ?, ?)",
                               (next_id, 0, f"row {next_id}", next_id / 8))
                    next_id += 1
                else:
                    db.execute("UPDATE st SET n = n + 1, x = x * 1.5 WHERE id = ?",
                               (rnd.randrange(1, next_id),))
                ts = T0 + timedelta(milliseconds=10 * seq)
                db.execute("INSERT INTO tm VALUES (?, ?, ?)",
                           (ts.isoformat(), seq, rnd.gauss(20, 2)))
                seq += 1
                db.execute("COMMIT")
                self.rows += 2
                self._stop.wait(self.pause)
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            db.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        assert self.errors == [], f"the application saw {self.errors[:3]}"


def has_triggers(db: Path) -> bool:
    return bool(sqlite_rows(db, "SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' "
                                "AND tbl_name = 'st'")[0][0] == 3)


async def columns_known(pool: asyncpg.Pool, dev: Device, table: str) -> bool:
    """A batch carrying the table's columns arrived (its review can be approved)."""
    return bool(await pool.fetchval(
        "SELECT count(*) FROM edge_schema_versions v JOIN edge_table_lineages l "
        "ON l.id = v.lineage_id WHERE l.device_id = $1 AND l.source_table = $2 "
        "AND v.schema_columns IS NOT NULL", dev.id, table))


# ------------------------------------------------------------------ processes

def spawn(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "EDGESYNC_LOG_LEVEL": "INFO"}
    with log.open("ab") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)


async def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        for _ in range(200):
            if proc.poll() is not None:
                return
            await asyncio.sleep(0.1)
        proc.kill()
        await asyncio.to_thread(proc.wait)


@dataclass
class Rig:
    pool: asyncpg.Pool
    device: Device
    link: LinkProxy  # the agent's
    worker_link: LinkProxy
    agent: subprocess.Popen[bytes]
    worker: subprocess.Popen[bytes]
    logs: Path
    keep_alive: int
    net: Namespace

    def agent_log(self) -> str:
        return (self.logs / "agent.log").read_text(errors="replace")

    def worker_log(self) -> str:
        return (self.logs / "serve.log").read_text(errors="replace")

    def alive(self) -> None:
        assert self.agent.poll() is None, tail(self.logs / "agent.log")
        assert self.worker.poll() is None, tail(self.logs / "serve.log")

    async def equal(self, limit: float = 120.0) -> float:
        """Wait until the cloud's state and telemetry rows equal SQLite's (nothing lost,
        nothing doubled); the seconds it took."""
        start = time.monotonic()
        dev, pool = self.device, self.pool
        st, tm = await target_of(pool, dev, "st"), await target_of(pool, dev, "tm")
        await wait_rows(lambda: state_rows(pool, st, dev, STATE),
                        lambda: sqlite_rows(dev.db, "SELECT id, n, label, x FROM st ORDER BY id"),
                        "st: cloud equals SQLite", limit)

        def telemetry() -> list[Row]:
            return [(utc(ts), seq, v) for ts, seq, v in
                    sqlite_rows(dev.db, "SELECT ts, seq, v FROM tm ORDER BY ts")]

        await wait_rows(lambda: ts_rows(pool, tm, dev, TELEMETRY), telemetry,
                        "tm: cloud equals SQLite", limit)
        return time.monotonic() - start


@contextlib.asynccontextmanager
async def rig(pool: asyncpg.Pool, database_url: str, tmp_path: Path, unique: str, *,
              rate_kbit: int | None = None, keep_alive: int = 30,
              confirm_timeout: str = "5s") -> AsyncIterator[Rig]:
    """Everything running, both tables approved and in sync, nothing written yet."""
    require_root()
    root = Path(tempfile.mkdtemp(prefix="edgesync-links-"))
    os.chmod(root, 0o755)
    broker = Broker(root)
    broker.conf.write_text(broker.conf.read_text() + "user root\n")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with namespace(unique, rate_kbit) as net:
            await broker.start()
            async with LinkProxy(broker.port, listen_host=net.host) as link, \
                    LinkProxy(broker.port) as worker_link:
                worker = spawn([EDGESYNC, "serve", "--database-url", database_url,
                                "--mqtt-url", worker_link.url, "--client-id",
                                f"links-{unique}", "--api-port", "0"], tmp_path / "serve.log")
                procs.append(worker)

                async def subscribed() -> bool:
                    assert worker.poll() is None, tail(tmp_path / "serve.log")
                    return "ingest subscribed" in (tmp_path / "serve.log").read_text(
                        errors="replace")

                # before the device's first batch: it carries the tables' columns
                await eventually(subscribed, 120, "the worker subscribed")
                dev = await register(pool, tmp_path, link.url, unique, tag="link",
                                     telemetry={"tm": "ts"}, flush_interval="200ms",
                                     snapshot_on_first_run=True,
                                     confirm_timeout=confirm_timeout)
                text = dev.config.read_text().replace(
                    "  transport: mqtt\n",
                    f"  transport: mqtt\n  mqtt:\n    keep_alive: {keep_alive}s\n")
                dev.config.write_text(text)
                create_tables(dev.db)
                agent = spawn([*net.inside, EDGESYNC, "agent", "--config", str(dev.config)],
                              tmp_path / "agent.log")
                procs.append(agent)
                the = Rig(pool, dev, link, worker_link, agent, worker, tmp_path, keep_alive, net)

                async def ready() -> bool:
                    the.alive()
                    return await asyncio.to_thread(has_triggers, dev.db)

                await eventually(ready, 120, "agent installed its triggers")
                for table in ("st", "tm"):
                    await eventually(functools.partial(columns_known, pool, dev, table), 120,
                                     f"{table}: the device sent its columns")
                    await approve(pool, dev, table, limit=120)
                await the.equal(120)
                yield the
    finally:
        for proc in procs:
            await stop(proc)
        await broker.stop()
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class Figures:
    """What a scenario prints: catch-up time and bytes on the wire per row."""
    name: str
    up0: int
    down0: int
    rows: int = 0
    catch_up: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def start(cls, name: str, link: LinkProxy) -> Figures:
        return cls(name, link.bytes_up, link.bytes_down)

    def report(self, link: LinkProxy, writer: Writer, catch_up: float) -> str:
        up, down = link.bytes_up - self.up0, link.bytes_down - self.down0
        rows = max(writer.rows, 1)
        extra = "".join(f", {k} {v}" for k, v in self.extra.items())
        line = (f"[links] {self.name}: {writer.rows} rows written; caught up "
                f"{catch_up:.1f}s after the link healed; agent→broker {up} B "
                f"({up / rows:.0f} B/row, resends included), broker→agent {down} B "
                f"({down / rows:.0f} B/row){extra}")
        print(line)
        return line
