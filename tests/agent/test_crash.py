"""Crash safety: the agent process is killed with SIGKILL at random moments while the
application writes; every committed change still reaches the cloud.

The test plays the cloud: it collects every published batch, answers with progress
controls (so the agent truncates its journal, crashes included), and replays the
batches into a model keeping, per primary key, the change with the highest
(journal_epoch, commit_seq) — what the cloud's newer-wins upsert does, duplicates
included. At the end the model must equal the SQLite table row for row.
"""

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
from typing import Any, BinaryIO

import orjson
import pytest
from agent_helpers import MQTT_URL, observer, send_control
from kits.write_load import write_load

N_KILLS = int(os.environ.get("EDGESYNC_CRASH_KILLS", "8"))
N_WRITES = int(os.environ.get("EDGESYNC_CRASH_WRITES", "1500"))


def agent_cmd(config: Path) -> list[str]:
    exe = Path(sys.executable).with_name("edgesync")
    return [str(exe), "--log-level", "info", "agent", "--config", str(config)]


async def spawn(config: Path, log: BinaryIO) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(*agent_cmd(config), stdout=log, stderr=log)


class Cloud:
    def __init__(self) -> None:
        self.batches: list[dict[str, Any]] = []
        self.unconfirmed: list[dict[str, Any]] = []  # batches to confirm, as progress lists
        self.model: dict[int, tuple[tuple[str, int], dict[str, Any] | None]] = {}

    def receive(self, payload: bytes) -> None:
        doc = orjson.loads(payload)
        self.batches.append(doc)
        epoch = doc["journal_epoch"]
        self.unconfirmed.append({k: doc[k] for k in ("journal_epoch", "batch_id",
                                                     "first_commit_seq", "last_commit_seq")})
        for r in doc["rows"]:
            version = (epoch, r["commit_seq"])
            key = r["pk"]["id"]
            if key not in self.model or self.model[key][0] < version:
                self.model[key] = (version, r["row"])

    def rows(self) -> dict[int, dict[str, Any]]:
        return {k: row for k, (_, row) in self.model.items() if row is not None}


def has_triggers(path: Path) -> bool:
    db = sqlite3.connect(path)
    n = db.execute("SELECT count(*) FROM sqlite_schema WHERE type = 'trigger'").fetchone()[0]
    db.close()
    return bool(n == 3)


def sqlite_rows(path: Path) -> dict[int, dict[str, Any]]:
    db = sqlite3.connect(path)
    out = {r[0]: {"id": r[0], "n": r[1], "s": r[2], "x": r[3]}
           for r in db.execute("SELECT id, n, s, x FROM t")}
    db.close()
    return out


@pytest.mark.slow
async def test_kill_9_at_random_moments_loses_nothing(source_db: Path, tmp_path: Path,
                                                      device_id: str) -> None:
    app = sqlite3.connect(source_db)
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, s TEXT, x REAL)")
    app.close()
    root = f"edgesync-test/{device_id}"
    config = tmp_path / "agent.yaml"
    config.write_text(
        f"connection:\n  server_url: {MQTT_URL}\n  device_id: {device_id}\n"
        f"  root_topic: {root}\n"
        f"sqlite-replication:\n  source_db_path: {source_db}\n"
        f"  state_db_path: {tmp_path / 'state.db'}\n  flush_interval: 100ms\n")
    cloud = Cloud()
    rnd = random.Random(int(os.environ.get("EDGESYNC_CRASH_SEED", "11")))
    log = (tmp_path / "agent.log").open("ab")
    stop, done, errors = threading.Event(), threading.Event(), []
    writer = threading.Thread(target=write_load, args=(source_db, 7, stop, errors, done),
                              kwargs={"at_most": N_WRITES})

    async with observer(device_id) as obs:
        await obs.subscribe(f"{root}/sync/rows/batch", qos=1)

        async def collect() -> None:
            async for msg in obs.messages:
                assert isinstance(msg.payload, bytes)
                cloud.receive(msg.payload)

        async def confirm() -> None:
            n = 0
            # Ends on ``stop`` too, not only when cancelled: Python 3.11's wait_for (under
            # aiomqtt's publish) loses a cancellation that lands as the PUBACK does, and
            # the loop then ran on until pytest-timeout (CI, emulated aarch64).
            while not stop.is_set():
                await asyncio.sleep(0.25)
                todo, cloud.unconfirmed = cloud.unconfirmed, []
                for epoch in {b["journal_epoch"] for b in todo}:
                    n += 1
                    await send_control(obs, root, {
                        "control_id": f"progress-{n}", "control_kind": "progress",
                        "source_table": "t", "journal_epoch": epoch,
                        "committed": [{k: b[k] for k in ("batch_id", "first_commit_seq",
                                                         "last_commit_seq")}
                                      for b in todo if b["journal_epoch"] == epoch]})

        tasks = [asyncio.create_task(collect()), asyncio.create_task(confirm())]
        proc: asyncio.subprocess.Process | None = None
        try:
            for i in range(N_KILLS):
                proc = await spawn(config, log)
                if i == 0:  # changes made before the agent ever ran are not captured
                    for _ in range(300):
                        if has_triggers(source_db):
                            break
                        await asyncio.sleep(0.05)
                    writer.start()
                await asyncio.sleep(rnd.uniform(0.2, 2.0))
                proc.send_signal(signal.SIGKILL)
                await proc.wait()
            await asyncio.to_thread(done.wait)
            proc = await spawn(config, log)
            expected = sqlite_rows(source_db)
            for _ in range(600):
                if cloud.rows() == expected:
                    break
                await asyncio.sleep(0.1)
        finally:
            stop.set()
            if proc is not None and proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                await proc.wait()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            writer.join()
            log.close()
    assert errors == []  # the application never saw SQLITE_BUSY or anything else
    assert len(expected) > 100
    got = cloud.rows()
    missing = sorted(set(expected) - set(got))
    assert not missing, f"{len(missing)} row(s) never arrived, e.g. {missing[:5]}"
    assert got == expected
    assert len({b["journal_epoch"] for b in cloud.batches}) == 1
    # progress controls truncated the journal along the way
    db = sqlite3.connect(source_db)
    left = db.execute("SELECT count(*) FROM __edgesync_journal").fetchone()[0]
    total = db.execute("SELECT max(commit_seq) FROM __edgesync_journal").fetchone()[0]
    db.close()
    assert left < total
