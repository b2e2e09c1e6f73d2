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

__all__ = ["DB_TIMEOUT", "Check", "Readiness", "ReadinessReport", "database_checks",
           "loop_checks", "report"]

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


@dataclass(frozen=True, slots=True)
class ReadinessReport:
    """What ``/readyz`` answers: every check, ready only when all passed (else 503)."""

    checks: tuple[Check, ...]

    @property
    def not_ready(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.ok)

    @property
    def ready(self) -> bool:
        return not self.not_ready

    @property
    def http_status(self) -> int:
        return 200 if self.ready else 503


def report(checks: Iterable[Check]) -> ReadinessReport:
    return ReadinessReport(tuple(checks))
