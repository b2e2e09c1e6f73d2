"""The worker gives the C heap's free pages back (``server._heap``): free chunks in the
middle of glibc's heap, which glibc itself keeps resident, leave RSS after a trim; the
Rust extension's allocator (mimalloc) is told to purge its freed pages at once."""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from edgesync.server import _heap

glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc",
                           reason="malloc_trim is glibc's; elsewhere trim_heap is a no-op")


def _rss_anon() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon in /proc/self/status")


@glibc
def test_a_trim_gives_back_the_free_middle_of_the_heap() -> None:
    # 60 MB in 1 KB objects (above CPython's small-object allocator: glibc's heap), then
    # nine in ten freed: ~54 MB free between live chunks, which glibc keeps resident.
    blocks = [bytes(1024) for _ in range(60_000)]
    kept = blocks[::10]
    del blocks
    before = _rss_anon()
    assert _heap.trim_heap()
    after = _rss_anon()
    assert before - after > 20 * 2**20, (before, after)
    assert len(kept) == 6_000


async def test_the_trim_loop_runs_rounds_until_cancelled(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    rounds = 0
    third = asyncio.Event()

    def counted() -> bool:
        nonlocal rounds
        rounds += 1
        if rounds == 3:
            third.set()
        return True

    monkeypatch.setattr(_heap, "trim_heap", counted)
    task = asyncio.create_task(_heap.heap_trim_loop(interval=0.01))
    await asyncio.wait_for(third.wait(), 10)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert rounds >= 3


# Whether a 256 KiB buffer is mapped apart after a 1 MiB one was freed: glibc raises its
# threshold to the freed chunk's size, so unpinned the second comes from the heap.
_LARGE_AFTER_LARGER = """
import ctypes, sys
from edgesync.server import _heap

class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = Info
if sys.argv[1] == "pinned":
    assert _heap.pin_mmap_threshold()
libc.free(libc.malloc(1 << 20))
before = libc.mallinfo2().hblks
buffer = libc.malloc(256 << 10)
print("mapped" if libc.mallinfo2().hblks == before + 1 else "heap")
libc.free(buffer)
"""


@glibc
@pytest.mark.parametrize(("mode", "where"), [("unpinned", "heap"), ("pinned", "mapped")])
def test_a_pinned_threshold_maps_large_buffers_apart(mode: str, where: str) -> None:
    out = subprocess.run([sys.executable, "-c", _LARGE_AFTER_LARGER, mode], check=True,
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == where, (mode, out.stdout, out.stderr)


# The Rust extension's allocator: the option its functions read and set is the one
# mimalloc itself takes from MIMALLOC_PURGE_DELAY (the option's number is ours to keep).
_PURGE_DELAY = """
from edgesync import _core
print(_core.heap_purge_delay())
_core.set_heap_purge_delay(0)
print(_core.heap_purge_delay())
try:
    _core.set_heap_purge_delay(-2)
except ValueError as exc:
    print(exc)
"""


def test_the_rust_heaps_purge_delay_is_mimallocs_own_option() -> None:
    out = subprocess.run([sys.executable, "-c", _PURGE_DELAY], check=True,
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "MIMALLOC_PURGE_DELAY": "77"})
    assert out.stdout.splitlines() == [
        "77", "0",
        "heap purge delay must be -1 (never), 0 (at once) or milliseconds, got -2"], out.stderr
