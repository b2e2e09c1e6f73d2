"""The worker gives the C heap's free pages back (``server._heap``): free chunks in the
middle of glibc's heap, which glibc itself keeps resident, leave RSS after a trim."""

from __future__ import annotations

import asyncio
import contextlib
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

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


# Rust memory (decoded batches) held, then freed; what is still resident 0.5 s later while
# the worker goes on decoding small batches (mimalloc purges as it allocates).
_RUST_HEAP_AFTER_A_BURST = """
import sys, time
from pathlib import Path
from edgesync import _core

def rss_anon():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024

big, small = Path(sys.argv[2]).read_bytes(), Path(sys.argv[3]).read_bytes()
_core.set_allocator_purge_delay(int(sys.argv[1]))
base = rss_anon()
held = [_core.decode_row_batch(big, 1 << 30) for _ in range(20)]
peak = rss_anon()
del held
until = time.monotonic() + 0.5
while time.monotonic() < until:
    _core.decode_row_batch(small)
print((peak - base) >> 20, (rss_anon() - base) >> 20)
"""


@pytest.mark.parametrize("delay_ms", [-1, 0, _heap.RUST_PURGE_DELAY_MS])
def test_the_rust_heap_gives_freed_pages_back_after_its_purge_delay(
        tmp_path: Path, batches: Any, delay_ms: int) -> None:
    f = batches()
    # ~2 MB of Rust memory each once decoded: 20 of them held are ~45 MB.
    big = f.payload(f.rows(*(("insert", {"id": i, "mode": "m" * 60, "setpoint": i / 2})
                             for i in range(4000))))
    (tmp_path / "big").write_bytes(big)
    (tmp_path / "small").write_bytes(f.payload(f.rows(("insert", {"id": 1, "mode": "x",
                                                                  "setpoint": 1.0}))))
    out = subprocess.run([sys.executable, "-c", _RUST_HEAP_AFTER_A_BURST, str(delay_ms),
                          str(tmp_path / "big"), str(tmp_path / "small")], check=True,
                         capture_output=True, text=True, timeout=60)
    grown, left = (int(v) for v in out.stdout.split())
    assert grown > 30, out.stdout  # the burst was resident: MB of Rust memory
    if delay_ms == -1:
        assert left > grown / 2, out.stdout  # never purged: still resident
    else:
        assert left < grown / 4, out.stdout


def test_the_purge_delay_is_set_and_refused_below_minus_one() -> None:
    from edgesync import _core

    before = _core.allocator_purge_delay()
    try:
        _heap.shorten_rust_purge_delay()
        assert _core.allocator_purge_delay() == _heap.RUST_PURGE_DELAY_MS
        with pytest.raises(ValueError, match="-1 for never"):
            _core.set_allocator_purge_delay(-2)
    finally:
        _core.set_allocator_purge_delay(before)
