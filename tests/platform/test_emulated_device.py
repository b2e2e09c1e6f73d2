"""The agent on the hardware the fleets run, emulated: Debian 12 arm64 and armhf userlands
(ci/userland.sh) under qemu-user, with no compiler in them.

For each architecture, in order: the base install from this build's wheel (its
dependencies from the package index, every one a wheel); the Rust ``JournalReader`` in use
there; the agent's tests run inside; and a real emulated ``edgesync agent`` process
syncing a row table and a telemetry table to a native ``edgesync serve`` process, an
update and a delete included. Install size and idle RSS are reported (RSS under
emulation counts qemu too: an upper bound of the device's).

ci/test.sh runs aarch64 on every run (and requires it: no skip); ``bash ci/wheels.sh
--emulate`` runs both.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest
from emulated_userland import ARCHES, REPO, Arch, Userland, disk_mb, require_ready, rss_kib
from kits.e2e_kit import (
    Device,
    app,
    approve,
    eventually,
    register,
    sqlite_rows,
    target_of,
    ts_rows,
    utc,
    wait_equal,
    wait_rows,
)

pytestmark = [pytest.mark.e2e, pytest.mark.once]

EDGESYNC = shutil.which("edgesync", path=str(Path(sys.executable).parent)) or "edgesync"
T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
ROWS = ["id", "name", "qty", "price", "photo"]
# The agent's tests that run inside too; tests/agent/test_install_size.py measures the
# host's virtualenv layout and is covered here by the install size itself.
AGENT_TESTS = "tests/agent"


@dataclass(frozen=True)
class Installed:
    userland: Userland
    venv: Path  # the base install: the wheel with no extras, in a fresh venv

    @property
    def edgesync(self) -> str:
        return str(self.venv / "bin" / "edgesync")


def report(request: pytest.FixtureRequest, line: str) -> None:
    """A figure for docs/benchmarks.md, shown in the run's output (captured or not)."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"[emulated] {line}")


# One base install per architecture and run: pytest runs the async test apart from the
# others, which would set the module's fixture up a second time.
_installs: dict[str, Installed] = {}


@pytest.fixture(scope="module", params=sorted(ARCHES))
def installed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[Installed]:
    """The base install in the emulated userland: ``pip install WHEEL``, as on a device."""
    arch: Arch = ARCHES[request.param]
    require_ready(arch)
    if arch.name in _installs:
        yield _installs[arch.name]
        return
    work = tmp_path_factory.mktemp(f"device-{arch.name}")
    userland = Userland(arch, (REPO, work))
    for cc in ("cc", "gcc", "clang"):
        found = userland.run(["sh", "-c", f"command -v {cc} || true"])
        assert found.stdout.strip() == "", f"the userland has a compiler: {found.stdout}"
    venv = work / "venv"
    made = userland.run(["/usr/bin/python3", "-m", "venv", str(venv)], timeout=300)
    assert made.returncode == 0, made.stderr
    wheel = arch.wheel()
    assert wheel is not None
    pip = userland.run([str(venv / "bin/pip"), "install", "--disable-pip-version-check",
                        str(wheel)], timeout=900)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    # Every dependency came as a wheel for this architecture: nothing was built.
    assert "Building wheel" not in pip.stdout, pip.stdout
    site = venv / "lib/python3.11/site-packages"
    report(request, f"{arch.name}: base install {disk_mb(site):.1f} MB in site-packages "
                    f"({disk_mb(venv):.1f} MB venv) from {wheel.name}")
    _installs[arch.name] = Installed(userland, venv)
    yield _installs[arch.name]


def test_the_rust_journal_reader_is_the_one_in_use(installed: Installed,
                                                   tmp_path: Path) -> None:
    probe = (
        "import platform, sqlite3\n"
        "from edgesync import _core\n"
        "from edgesync.agent.capture._batcher import open_reader\n"
        f"db = sqlite3.connect({str(tmp_path / 'app.db')!r})\n"
        "db.execute('CREATE TABLE t (a)')\n"
        "reader = open_reader(db)\n"
        "print(platform.machine(), type(reader).__name__, _core.__file__)\n")
    out = Userland(installed.userland.arch, (*installed.userland.mounts, tmp_path)).run(
        [str(installed.venv / "bin/python"), "-c", probe])
    assert out.returncode == 0, out.stderr
    machine, reader, core = out.stdout.split()
    assert machine == installed.userland.arch.name
    assert reader == "JournalReader", out.stdout + out.stderr  # None: Python's sqlite3
    assert core.startswith(str(installed.venv))


@pytest.mark.timeout(1800)
def test_the_agent_tests_pass_emulated(installed: Installed,
                                       request: pytest.FixtureRequest) -> None:
    """tests/agent inside, in a venv that also sees Debian's python3-cryptography (the
    TLS test's certificates; PyPI has no armv7l wheel of it) and runs its mosquitto."""
    userland = installed.userland
    venv = installed.venv.parent / "test-venv"
    made = userland.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages",
                         str(venv)], timeout=300)
    assert made.returncode == 0, made.stderr
    wheel = userland.arch.wheel()
    assert wheel is not None
    pip = userland.run([str(venv / "bin/pip"), "install", "-q", "--disable-pip-version-check",
                        str(wheel), "pytest>=8.3", "pytest-asyncio>=0.24",
                        "pytest-timeout>=2.3"], timeout=900)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    started = time.monotonic()
    out = userland.run([str(venv / "bin/python"), "-m", "pytest", "-p", "no:cacheprovider",
                        "-q", "--rootdir", str(REPO), "-c", str(REPO / "pyproject.toml"),
                        str(REPO / AGENT_TESTS)],
                       env={"PYTHONDONTWRITEBYTECODE": "1"}, timeout=1700)
    tail = "\n".join(out.stdout.splitlines()[-30:])
    assert out.returncode == 0, tail + out.stderr
    report(request, f"{userland.arch.name}: {out.stdout.splitlines()[-1].strip('= ')} "
                    f"({time.monotonic() - started:.0f} s)")


def _start_serve(database_url: str, mqtt_url: str, work: Path, unique: str
                 ) -> tuple[subprocess.Popen[bytes], Path]:
    log = work / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [EDGESYNC, "serve", "--database-url", database_url, "--mqtt-url", mqtt_url,
             "--api-port", "0", "--data-dir", str(work / "cloud"),
             "--client-id", f"worker-{unique}"],
            stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, "EDGESYNC_LOG_LEVEL": "INFO"})
    return proc, log


def _text(log: Path, tail: int = 100_000) -> str:
    return log.read_text(errors="replace")[-tail:]


async def _wait_log(proc: subprocess.Popen[bytes], log: Path, text: str,
                    limit: float) -> None:
    async def seen() -> bool:
        assert proc.poll() is None, f"exited {proc.returncode}:\n{_text(log, 3000)}"
        return text in _text(log)

    try:
        await eventually(seen, limit, f"{text!r} in {log.name}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_text(log, 3000)}") from None


def _stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return proc.returncode


def _telemetry(db: Path) -> list[tuple[object, ...]]:
    return [(utc(ts), sensor, value) for ts, sensor, value in
            sqlite_rows(db, "SELECT ts, sensor, value FROM readings ORDER BY ts")]


async def _idle_rss(pid: int, seconds: float = 5.0) -> int:
    """The most resident memory seen over a few seconds of the agent with nothing to send."""
    peak = 0
    for _ in range(int(seconds * 4)):
        peak = max(peak, rss_kib(pid))
        await asyncio.sleep(0.25)
    return peak


@pytest.mark.timeout(900)
async def test_an_emulated_agent_syncs_to_native_serve(
        installed: Installed, tmp_path: Path, database_url: str, mqtt_url: str,
        pool: asyncpg.Pool, unique: str, request: pytest.FixtureRequest) -> None:
    arch = installed.userland.arch
    serve, serve_log = _start_serve(database_url, mqtt_url, tmp_path, unique)
    agent: subprocess.Popen[bytes] | None = None
    try:
        await _wait_log(serve, serve_log, "serving: broker", 120)
        dev: Device = await register(pool, tmp_path, mqtt_url, unique, tag=arch.name,
                                     telemetry={"readings": "ts"}, snapshot_on_first_run=True)
        app(dev.db,
            "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, qty INTEGER, "
            "price REAL, photo BLOB)",
            "CREATE TABLE readings (ts TEXT NOT NULL, sensor TEXT, value REAL)",
            ("INSERT INTO items VALUES (?, ?, ?, ?, ?)",
             [(i, f"item {i} ☃", i * 3, i / 7, bytes([i % 256, 0, 255]) if i % 2 else None)
              for i in range(1, 301)]),
            ("INSERT INTO readings VALUES (?, ?, ?)",
             [((T0 + timedelta(seconds=i)).isoformat(), f"s{i % 4}", i * 0.25)
              for i in range(200)]))
        userland = Userland(arch, (*installed.userland.mounts, tmp_path))
        agent_log = tmp_path / "agent.log"
        agent = userland.popen([installed.edgesync, "agent", "--config", str(dev.config)],
                               agent_log, env={"EDGESYNC_LOG_LEVEL": "INFO"})

        for table in ("items", "readings"):
            await approve(pool, dev, table, limit=180)
        await wait_equal(pool, dev, "items", ROWS, limit=180)
        rd_target = await target_of(pool, dev, "readings")

        async def cloud_readings() -> list[tuple[object, ...]]:
            return await ts_rows(pool, rd_target, dev, ["sensor", "value"])

        await wait_rows(cloud_readings, lambda: _telemetry(dev.db), "readings", limit=180)

        # The device changes rows: an update and a delete arrive too.
        app(dev.db, "UPDATE items SET qty = qty + 1000, name = 'changed' WHERE id % 10 = 0",
            "DELETE FROM items WHERE id % 7 = 0",
            ("INSERT INTO readings VALUES (?, ?, ?)",
             [((T0 + timedelta(seconds=1000 + i)).isoformat(), "late", -i) for i in range(20)]))
        await wait_equal(pool, dev, "items", ROWS, limit=180)
        await wait_rows(cloud_readings, lambda: _telemetry(dev.db), "readings", limit=180)

        assert agent.poll() is None, _text(agent_log, 3000)
        log = _text(agent_log)
        assert "read through Python's sqlite3" not in log, log  # the Rust reader did
        rss = await _idle_rss(agent.pid)
        report(request, f"{arch.name}: agent idle RSS under emulation {rss / 1024:.0f} MiB "
                        "(qemu included: an upper bound)")
    finally:
        stopped = _stop(agent) if agent is not None else None
        _stop(serve)
    # SIGTERM stops the agent cleanly, as systemd does (agent/edgesync-agent.service).
    assert stopped == 0, _text(tmp_path / "agent.log", 3000)
