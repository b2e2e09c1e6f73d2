"""What the agent costs a device: its memory once started and idle, and its CPU to publish
journaled rows.

``edgesync agent`` runs as its own process (the console script of this environment) on an
application SQLite file with one ``rows`` table, against a private Mosquitto on a free
port. An observer subscribed to the device's topics counts the rows that arrive.

* Idle RSS: ``VmRSS`` of the agent process (``/proc/PID/status``) after its start-up
  (triggers installed, first batch published) and 3 s of idle. Target ≤ 45 MB.
* CPU per 10,000 rows: the agent's user + system CPU time (``/proc/PID/stat``) from the
  moment the application commits N rows (10,000 per transaction; ``EDGESYNC_BENCH_ROWS``,
  default 10,000) until the observer has every row, scaled to 10,000 rows. Also the CPU
  used while idle, per second.

Run ``pytest benches/bench_agent_footprint.py --benchmark-only -s`` for the figures; in an
agent-only virtualenv (the wheel with no extras) they are the device's own. The CI smoke
(``--benchmark-disable``) runs the same once.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiomqtt
import orjson

from edgesync.protocol import mqtt_client, parse_broker_url

EDGESYNC = shutil.which("edgesync", path=str(Path(sys.executable).parent)) or "edgesync"
MOSQUITTO = "/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else "mosquitto"
ROWS = int(os.environ.get("EDGESYNC_BENCH_ROWS", "10000"))
IDLE_S = 3.0
_TICK = os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def write_rows(db_path: Path, first: int, n: int) -> None:
    with sqlite3.connect(db_path) as db:
        db.executemany("INSERT INTO readings(id, name, value, note) VALUES (?, ?, ?, ?)",
                       [(i, f"sensor-{i % 97}", i * 0.25, "x" * 40)
                        for i in range(first, first + n)])


def wait_for_triggers(db_path: Path, limit: float) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        with sqlite3.connect(db_path) as db:
            if db.execute("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' "
                          "AND tbl_name = 'readings'").fetchone()[0]:
                return
        time.sleep(0.1)
    raise AssertionError(f"the agent installed no trigger on {db_path} in {limit:.0f} s")


async def count_rows(client: aiomqtt.Client, seen: list[int], want: int) -> None:
    async for msg in client.messages:
        if str(msg.topic).endswith("/sync/rows/batch"):
            assert isinstance(msg.payload, bytes)
            seen[0] += len(orjson.loads(msg.payload)["rows"])
            if seen[0] >= want:
                return


@contextlib.contextmanager
def private_mosquitto(work: Path) -> Iterator[str]:
    """A Mosquitto of its own on a free port (this bench imports nothing of the cloud side,
    so it also runs in an agent-only virtualenv)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    conf = work / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                    f"max_queued_messages 0\nuser {getpass.getuser()}\n")
    proc = subprocess.Popen([MOSQUITTO, "-c", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield f"tcp://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def measure(work: Path) -> dict[str, Any]:
    with private_mosquitto(work) as url:
        return await _measure(work, url)


async def _measure(work: Path, broker_url: str) -> dict[str, Any]:
    device = f"bench-{uuid.uuid4().hex[:8]}"
    root = f"bench/{device}"
    source = work / "app.db"
    with sqlite3.connect(source) as db:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("CREATE TABLE readings (id INTEGER PRIMARY KEY, name TEXT, value REAL, "
                   "note TEXT)")
    config = work / "agent.yaml"
    config.write_text(orjson.dumps({
        "connection": {"server_url": broker_url, "device_id": device, "root_topic": root},
        "sqlite-replication": {"source_db_path": str(source),
                               "state_db_path": str(work / "state.db"),
                               "flush_interval": "0.2s"},
    }).decode())  # JSON is YAML
    log = (work / "agent.log").open("wb")
    argv = [EDGESYNC, "--log-level", "WARNING", "agent", "--config", str(config)]
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)  # noqa: ASYNC220
    observer = mqtt_client(parse_broker_url(broker_url), identifier=f"{device}-observer",
                           clean_session=True)
    try:
        async with observer:
            await observer.subscribe(f"{root}/#", qos=1)
            seen = [0]
            # start-up: the agent installs its triggers, then publishes a first row
            await asyncio.to_thread(wait_for_triggers, source, 60)
            write_rows(source, 0, 1)
            async with asyncio.timeout(60):
                await count_rows(observer, seen, 1)
            await asyncio.sleep(IDLE_S)
            idle_cpu0, t0 = cpu_s(proc.pid), time.monotonic()
            await asyncio.sleep(IDLE_S)
            idle_cpu = (cpu_s(proc.pid) - idle_cpu0) / (time.monotonic() - t0)
            idle_rss = rss_mb(proc.pid)
            cpu0, wall0 = cpu_s(proc.pid), time.monotonic()
            await asyncio.to_thread(write_rows, source, 1, ROWS)
            async with asyncio.timeout(300):
                await count_rows(observer, seen, 1 + ROWS)
            busy_cpu, wall = cpu_s(proc.pid) - cpu0, time.monotonic() - wall0
            busy_rss = rss_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
    return {"idle_rss_mb": round(idle_rss, 1), "rss_after_rows_mb": round(busy_rss, 1),
            "idle_cpu_percent": round(100 * idle_cpu, 2), "rows": ROWS,
            "cpu_s_per_10k_rows": round(busy_cpu * 10_000 / ROWS, 3),
            "wall_s": round(wall, 2), "rows_received": seen[0] - 1,
            "python": sys.version.split()[0]}


def test_agent_footprint(benchmark: Any, tmp_path: Path) -> None:
    figures: dict[str, Any] = {}
    benchmark.pedantic(lambda: figures.update(asyncio.run(measure(tmp_path))), rounds=1,
                       iterations=1)
    benchmark.extra_info.update(figures)
    print(f"\nagent footprint: {figures}")
    assert figures["rows_received"] >= ROWS
