"""Running a coroutine as a process: uvloop when available, clean stop on SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["STOPPING", "run_until_signal"]

T = TypeVar("T")

# Set by SIGINT/SIGTERM. A Ctrl-C in a terminal also reaches the embedded PostgreSQL's
# initdb/pg_ctl (same process group); their failure while we stop is expected, not news.
STOPPING = threading.Event()


async def _cancel_on_signal(coro: Coroutine[Any, Any, T]) -> T | None:
    task = asyncio.ensure_future(coro)
    loop = asyncio.get_running_loop()

    def stop() -> None:
        STOPPING.set()
        task.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop)
    try:
        return await task
    except asyncio.CancelledError:
        if task.cancelled():
            return None  # stopped by a signal: a clean exit
        raise


def run_until_signal(coro: Coroutine[Any, Any, T]) -> T | None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on POSIX
        return asyncio.run(_cancel_on_signal(coro))
    return uvloop.run(_cancel_on_signal(coro))
