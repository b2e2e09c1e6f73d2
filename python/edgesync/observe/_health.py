"""Readiness: named checks, each ok or not with a one-line reason.

``/healthz`` only says the process answers; ``/readyz`` runs the checks of a
``Readiness`` (the server's: database, migrations, broker sessions, background loops;
an API alone: database and migrations) and answers 503 naming every check that failed.
The checks never wait long: a database that does not answer within ``DB_TIMEOUT`` is
not ready, whatever the pool's own connect timeout.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import asyncpg

from edgesync.protocol import LoopStatus, loop_state
from edgesync.store import KNOWN_VERSION, applied_version

__all__ = ["DB_TIMEOUT", "Check", "Readiness", "database_checks", "loop_checks", "report"]

DB_TIMEOUT = 2.0


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str | None = None


Readiness = Callable[[], Awaitable[list[Check]]]


async def database_checks(pool: asyncpg.Pool | None) -> list[Check]:
    """``database`` (a connection answers) and ``migrations`` (the schema is the one
    this build knows)."""
    if pool is None:
        return [Check("database", False, "no database pool (the app is not started)")]
    try:
        async with asyncio.timeout(DB_TIMEOUT), pool.acquire() as conn:
            current = await applied_version(conn)
    except TimeoutError:
        return [Check("database", False, f"no answer within {DB_TIMEOUT:g}s")]
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        return [Check("database", False, f"{type(exc).__name__}: {exc}")]
    if current == KNOWN_VERSION:
        migrations = Check("migrations", True, f"version {current}")
    else:
        migrations = Check("migrations", False, f"database at version {current}, this edgesync "
                                                f"expects {KNOWN_VERSION}: run edgesync serve "
                                                "(it migrates at start) or upgrade edgesync")
    return [Check("database", True), migrations]


def loop_checks(tasks: Iterable[asyncio.Task[Any]]) -> list[Check]:
    """One ``loop:<task name>`` check per task: alive, and its loop up (a loop that has
    not succeeded yet, or whose last attempt failed, is not ready)."""
    out = []
    now = time.time()
    for task in tasks:
        name = f"loop:{task.get_name()}"
        if task.done():
            out.append(Check(name, False, "stopped"))
            continue
        state = loop_state(task)
        if state is None or state.status is LoopStatus.STARTING:
            out.append(Check(name, False, "starting"))
        elif state.status is LoopStatus.RETRYING:
            out.append(Check(name, False, f"{state.name}: failing for {now - state.since:.0f}s"
                                          f" ({state.failures} in a row): {state.last_error}"))
        else:
            out.append(Check(name, True))
    return out


def report(checks: list[Check]) -> tuple[int, dict[str, Any]]:
    """The HTTP status and JSON body of ``/readyz``."""
    failed = [c for c in checks if not c.ok]
    body = {"status": "not_ready" if failed else "ready",
            "not_ready": [{"check": c.name, "detail": c.detail} for c in failed],
            "checks": {c.name: {"ok": c.ok, "detail": c.detail} for c in checks}}
    return (503 if failed else 200), body
