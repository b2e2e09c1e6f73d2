"""Giving the C heap's free pages back to the system, every few seconds.

A worker's messages are mostly larger than CPython's small-object allocator takes
(batches of a few KB), so they come from glibc's heap, thousands a second, freed out of
order. glibc returns only the heap's top to the system; the free chunks in the middle
stay resident. In a soak (1,000 devices, 1,000 batches/s) they grew from 7 to 17 MB of
a 45 MB heap after a database restart and a replay, which alone is +10 % of the worker's
RSS. ``malloc_trim(0)`` hands every free page back (``madvise``) in ~3 ms for such a
heap; the pages a later allocation touches come back as fresh zero pages.

glibc also raises its mmap threshold each time a chunk it had mmapped is freed (up to
32 MiB): after a database restart's backlog, every large buffer (a group's COPY data, a
chunk of rows) is carved from the heap instead and leaves holes in it. In an hour's soak
the heap's free space grew from 10 to 29 MB, 17 to 29 at the restart alone, the resident
part of it with it. ``pin_mmap_threshold`` keeps the threshold at glibc's default
(128 KiB), which also stops the adjusting: a large buffer is mapped and unmapped whole.

The Rust extension has its own allocator (mimalloc), which keeps freed pages resident
for 10 ms and purges them only on a later allocation of the same thread: between bursts
4-10 MB of freed pages stayed resident (soak, 10 minutes: the worker's Rust heap swung
from 5.5 to 10 MB under steady load, and stayed at 5.5-6 with ``purge_rust_heap_at_once``).

Only glibc has ``malloc_trim`` and ``mallopt``; elsewhere (musl, macOS) both are no-ops.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable
from typing import Any, NoReturn

from edgesync import _core
from edgesync.protocol import periodic_loop

__all__ = ["HEAP_TRIM_INTERVAL", "MMAP_THRESHOLD", "heap_trim_loop", "pin_mmap_threshold",
           "purge_rust_heap_at_once", "trim_heap"]

_log = logging.getLogger(__name__)
# Seconds between two trims: often enough that the free pages of a burst are not
# resident for long (at 10 s a soak's heap swung 2-5 MB above its level between trims),
# rarely enough that the ~3 ms (the event loop's) do not count.
HEAP_TRIM_INTERVAL = 2.0
# glibc's own starting value: buffers this large or larger are mapped apart.
MMAP_THRESHOLD = 128 * 1024
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)


def _libc(name: str, argtypes: list[Any]) -> Callable[..., int] | None:
    """The C library's ``name`` returning an int, or None where it has none."""
    try:
        libc = ctypes.CDLL(None)
    except OSError:  # pragma: no cover - a platform without a C library to open
        return None
    fn = getattr(libc, name, None)
    if fn is None:
        return None
    fn.argtypes, fn.restype = argtypes, ctypes.c_int
    return fn  # type: ignore[no-any-return]


_TRIM = _libc("malloc_trim", [ctypes.c_size_t])
# musl has a mallopt that means nothing: only with glibc's malloc_trim beside it.
_MALLOPT = _libc("mallopt", [ctypes.c_int, ctypes.c_int]) if _TRIM is not None else None


def pin_mmap_threshold(size: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at ``size`` (no more raising it); whether it could."""
    return _MALLOPT is not None and _MALLOPT(_M_MMAP_THRESHOLD, size) == 1


def purge_rust_heap_at_once() -> None:
    """The Rust extension's allocator gives freed pages back as they are freed."""
    _core.set_heap_purge_delay(0)


def trim_heap() -> bool:
    """Give the C heap's free pages back; whether the platform can (glibc)."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


async def heap_trim_loop(interval: float = HEAP_TRIM_INTERVAL) -> NoReturn:
    async def round_() -> None:
        trim_heap()

    await periodic_loop("heap trim", round_, interval=interval, logger=_log)
