"""``edgesync serve`` as a process: starts on the embedded defaults, keeps data across
restarts, and stops cleanly on SIGTERM and SIGINT."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

EDGESYNC = shutil.which("edgesync", path=str(Path(sys.executable).parent)) or "edgesync"
pytestmark = pytest.mark.e2e


def start(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "EDGESYNC_LOG_LEVEL": "INFO"}
    return subprocess.Popen([EDGESYNC, "serve", "--api-port", "0", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)


def wait_serving(proc: subprocess.Popen[str], limit: float = 120) -> str:
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + limit
    for line in proc.stdout:
        seen.append(line)
        if "serving: broker" in line:
            return "".join(seen)
        assert time.monotonic() < deadline, "".join(seen)
    raise AssertionError("serve exited early:\n" + "".join(seen))


def stop(proc: subprocess.Popen[str], sig: int) -> str:
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_stops_cleanly_on_signal(sig: int, database_url: str, mqtt_url: str) -> None:
    proc = start("--database-url", database_url, "--mqtt-url", mqtt_url)
    try:
        wait_serving(proc)
        stop(proc, sig)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_embedded_defaults_keep_data_across_restarts(embedded_dir: Path, unique: str) -> None:
    data = embedded_dir / "data"
    proc = start("--data-dir", str(data), "--embedded-mqtt-port", "0")
    try:
        wait_serving(proc)
        added = subprocess.run(
            [EDGESYNC, "devices", "add", f"gw-{unique}", "--project", "p", "--data-dir",
             str(data)], capture_output=True, text=True, timeout=120, check=False)
        assert added.returncode == 0, added.stderr
        stop(proc, signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
    proc = start("--data-dir", str(data), "--embedded-mqtt-port", "0")
    try:
        log = wait_serving(proc)
        assert "0 migration(s) applied" in log
        listed = subprocess.run([EDGESYNC, "devices", "list", "--data-dir", str(data)],
                                capture_output=True, text=True, timeout=120, check=False)
        assert f"gw-{unique}" in listed.stdout, listed.stderr
        stop(proc, signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
    # The embedded server stopped with the worker: no postmaster left on that data dir.
    assert not (data / "postgres" / "postmaster.pid").exists()


def test_two_workers_on_one_host_with_their_own_client_ids(database_url: str, mqtt_url: str,
                                                          unique: str) -> None:
    """With the default id (edgesync-worker-<hostname>) a second worker on the host would
    take the first one's MQTT session; ``--client-id`` keeps them apart."""
    procs = [start("--database-url", database_url, "--mqtt-url", mqtt_url,
                   "--client-id", f"worker-{n}-{unique}", "--shared-group", f"g-{unique}")
             for n in (1, 2)]
    try:
        logs = [wait_serving(p) for p in procs]
        for n, log in enumerate(logs, start=1):
            assert f"as worker-{n}-{unique}" in log
        time.sleep(3)  # a taken-over session shows as a disconnect right away
        outs = [stop(p, signal.SIGTERM) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for out in outs:
        assert "reconnecting" not in out, out
