"""Crash safety end to end (real Mosquitto, PostgreSQL, server and agent process): the
agent runs as ``edgesync agent --config F`` and is killed with SIGKILL several times at
random moments while an ordinary application writes (inserts, updates, deletes) and
the real server ingests, materializes and confirms. Each time it is restarted. When
the load is over and the agent settles, the cloud equals SQLite row for row (nothing
lost, nothing doubled) and the server's progress controls have drained the journal."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import sqlite3
import sys
import threading
from pathlib import Path
from typing import BinaryIO

import pytest
from control_kit import (
    journal_count,
    journal_drained,
)
from kits.e2e_kit import (
    app,
    approve,
    cloud,
    eventually,
    pool_of,
    register,
    wait_equal,
)
from kits.write_load import write_load

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]

COLS = ["id", "n", "s", "x"]
N_KILLS = int(os.environ.get("EDGESYNC_E2E_KILLS", "6"))
MIN_WRITES = int(os.environ.get("EDGESYNC_E2E_WRITES", "300"))


async def spawn(config: Path, log: BinaryIO) -> asyncio.subprocess.Process:
    exe = Path(sys.executable).with_name("edgesync")
    return await asyncio.create_subprocess_exec(
        str(exe), "--log-level", "info", "agent", "--config", str(config),
        stdout=log, stderr=log)


def has_triggers(path: Path) -> bool:
    with contextlib.closing(sqlite3.connect(path, timeout=10)) as db:
        n = db.execute("SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' "
                       "AND tbl_name = 't'").fetchone()[0]
    return bool(n == 3)


async def test_agent_killed_9_during_writes_loses_and_doubles_nothing(
        tmp_path: Path, database_url: str, mqtt_url: str, unique: str) -> None:
    seed = int(os.environ.get("EDGESYNC_E2E_SEED", "0")) or random.randrange(1, 10**6)
    rnd = random.Random(seed)
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag="k9",
                             flush_interval="100ms", confirm_timeout="2s")
        app(dev.db, "CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, s TEXT, x REAL)")
        log_path = dev.home / "agent.log"
        stop, done = threading.Event(), threading.Event()
        errors: list[BaseException] = []
        writer = threading.Thread(target=write_load,
                                  args=(dev.db, seed, stop, errors, done),
                                  kwargs={"at_least": MIN_WRITES}, daemon=True)
        proc: asyncio.subprocess.Process | None = None
        with log_path.open("ab") as log:
            try:
                proc = await spawn(dev.config, log)
                # changes made before the agent first installed its triggers are not
                # captured (no snapshot_on_first_run): start writing after that
                await eventually(lambda: asyncio.to_thread(has_triggers, dev.db),
                                 what="triggers installed")
                writer.start()
                await approve(pool, dev, "t")
                for _ in range(N_KILLS):
                    await asyncio.sleep(rnd.uniform(0.1, 1.5))
                    proc.send_signal(signal.SIGKILL)
                    await proc.wait()
                    proc = await spawn(dev.config, log)
                assert not done.is_set(), f"seed {seed}: the load ended early: {errors[:3]}"
                stop.set()
                await asyncio.to_thread(done.wait, 90)
                assert done.is_set(), "the application's write load did not finish"
                assert errors == [], f"seed {seed}: the application saw {errors[:3]}"
                rows = await wait_equal(pool, dev, "t", COLS, limit=60)
                assert len(rows) > 100
                await eventually(lambda: journal_drained(dev.db), 40,
                                 f"journal drained (has {journal_count(dev.db)} rows)")
            finally:
                stop.set()
                if proc is not None and proc.returncode is None:
                    proc.send_signal(signal.SIGTERM)
                    try:
                        await asyncio.wait_for(proc.wait(), 20)
                    except TimeoutError:
                        proc.kill()
                        await proc.wait()
                writer.join(30)
        # nothing the cloud would materialize twice: one journal epoch throughout
        epochs = await pool.fetchval(
            "SELECT count(DISTINCT journal_epoch) FROM edge_export_segments WHERE device_id = $1 "
            "AND journal_epoch IS NOT NULL", dev.id)
        assert epochs == 1, f"seed {seed}: the journal was rebuilt ({epochs} epochs)"
