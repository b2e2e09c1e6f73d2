"""An ordinary application writing to ``t (id INTEGER PRIMARY KEY, n INTEGER, s TEXT,
x REAL)`` while the agent is killed and restarted (tests/agent/test_crash.py,
tests/e2e/test_ctl_kill9.py; both import it by plain name: pytest puts tests/ on
``sys.path`` for tests/conftest.py)."""

from __future__ import annotations

import random
import sqlite3
import threading
from pathlib import Path


def write_load(path: Path, seed: int, stop: threading.Event, errors: list[BaseException],
               done: threading.Event, *, at_least: int = 0, at_most: int | None = None
               ) -> None:
    """Small transactions of random inserts, updates and deletes, 5 s busy timeout, no
    agent code, until ``stop`` is set: at least ``at_least`` transactions (so a kill
    lands during the load) and at most ``at_most``. Runs in a thread; whatever it
    raises is put in ``errors`` (the tests assert there was nothing: no SQLITE_BUSY)."""
    rnd = random.Random(seed)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA busy_timeout = 5000")
    ids: list[int] = []
    next_id = 1
    try:
        i = 0
        while (i < at_least or not stop.is_set()) and (at_most is None or i < at_most):
            i += 1
            db.execute("BEGIN")
            for _ in range(rnd.randint(1, 5)):
                op = rnd.random()
                if op < 0.5 or not ids:
                    db.execute("INSERT INTO t VALUES (?, ?, ?, ?)",
                               (next_id, i, f"r{next_id}", next_id * 0.25))
                    ids.append(next_id)
                    next_id += 1
                elif op < 0.85:
                    db.execute("UPDATE t SET n = ?, s = s || '.' WHERE id = ?",
                               (i, rnd.choice(ids)))
                else:
                    db.execute("DELETE FROM t WHERE id = ?",
                               (ids.pop(rnd.randrange(len(ids))),))
            db.execute("COMMIT")
            stop.wait(0.003)
    except BaseException as exc:
        errors.append(exc)
    finally:
        db.close()
        done.set()
