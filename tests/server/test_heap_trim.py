"""The worker gives the C heap's free pages back (``server._heap``): free chunks in the
middle of glibc's heap, which glibc itself keeps resident, leave RSS after a trim."""

from __future__ import annotations

import asyncio
import contextlib
import platform
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
