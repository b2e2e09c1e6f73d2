"""The application never sees SQLITE_BUSY while the agent installs triggers, flushes
and truncates its journal (the application uses a 5 s busy timeout, as apps do)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from agent_helpers import make_config, next_message, observer, send_control

from edgesync.agent import Agent

N_TRANSACTIONS = 400


def app_writes(path: Path, errors: list[BaseException], done: threading.Event) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA busy_timeout = 5000")
    try:
        for i in range(N_TRANSACTIONS):
            db.execute("BEGIN")
            db.executemany("INSERT INTO t (v, w) VALUES (?, ?)",
                           [(f"row {i}.{k}", i * k) for k in range(50)])
            db.execute("UPDATE t SET w = w + 1 WHERE id % 7 = ?", (i % 7,))
            db.execute("DELETE FROM t WHERE id % 97 = ?", (i % 97,))
            db.execute("COMMIT")
            # a reader too, as apps have: WAL readers never block the agent or vice versa
            db.execute("SELECT count(*) FROM t").fetchone()
    except BaseException as exc:
        errors.append(exc)
    finally:
        db.close()
        done.set()


async def test_application_never_sees_busy(app: sqlite3.Connection, source_db: Path,
                                           tmp_path: Path, device_id: str) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT, w INTEGER)")
    cfg = make_config(device_id, source_db, tmp_path)
    root = cfg.connection.root_topic
    errors: list[BaseException] = []
    done = threading.Event()
    writer = threading.Thread(target=app_writes, args=(source_db, errors, done))
    async with observer(device_id) as obs, Agent(cfg) as agent:
        await obs.subscribe(f"{root}/sync/rows/batch", qos=1)
        writer.start()
        n = 0
        while not done.is_set() or n == 0:
            n += 1
            if await agent.flush():
                # confirm everything received so far: the agent deletes journal rows
                # (writes to the application's database) while the application writes
                doc = await next_message(obs, f"{root}/sync/rows/batch")
                await send_control(obs, root, {
                    "control_id": f"p{n}", "control_kind": "progress", "source_table": "t",
                    "journal_epoch": doc["journal_epoch"],
                    "committed": [{k: doc[k] for k in ("batch_id", "first_commit_seq",
                                                       "last_commit_seq")}]})
        writer.join()
    assert errors == []
