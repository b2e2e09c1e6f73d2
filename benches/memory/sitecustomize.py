"""The worker's memory by allocator, for the soak: put this directory on ``PYTHONPATH`` and set
``EDGESYNC_MEMDIAG`` to a file; every ``edgesync serve`` then appends one JSON line every
10 s: RSS; CPU seconds so far; glibc's arena, in use, free and mapped (``mallinfo2``);
pymalloc's arenas and the bytes of their used and free blocks (``sys._debugmallocstats``);
resident MB by mapping: the C heap, mimalloc's arena (Rust; the one anonymous mapping
of 64 MiB or more), other anonymous, files. Any other process is left alone.

    PYTHONPATH=benches/memory EDGESYNC_MEMDIAG=/tmp/mem.jsonl EDGESYNC_SOAK_S=600 \\
        pytest benches/bench_soak.py --benchmark-only -s -p no:cacheprovider

A diagnostic (docs/benchmarks.md, "Soak"): it adds a thread (and so a glibc arena) and
holds the interpreter ~ms every 10 s. ``EDGESYNC_MEMDIAG_TRACE=N`` also traces Python's
allocations (``tracemalloc``, N frames each: allocations cost about twice as much) and adds
to each line the 12 call sites holding the most, which holds the interpreter ~0.5 s.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import sys
import tempfile
import threading
import time
from typing import Any


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _is_serve() -> bool:
    try:
        with open("/proc/self/cmdline", "rb") as f:
            return b"serve" in f.read().split(b"\0")
    except OSError:
        return False


def _pymalloc() -> dict[str, Any]:
    """pymalloc's own figures: it prints them to the C stderr, so fd 2 goes to a file."""
    with tempfile.TemporaryFile() as tmp:
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read().decode(errors="replace")
    out: dict[str, Any] = {}
    for key, pattern in (("py_arenas", r"# arenas allocated current\s*=\s*([\d,]+)"),
                         ("py_used_mb", r"# bytes in allocated blocks\s*=\s*([\d,]+)"),
                         ("py_free_mb", r"# bytes in available blocks\s*=\s*([\d,]+)")):
        if m := re.search(pattern, text):
            value = int(m[1].replace(",", ""))
            out[key] = value if key == "py_arenas" else round(value / 2**20, 1)
    return out


def _mappings() -> dict[str, float]:
    kb = {"heap": 0, "mimalloc": 0, "other_anon": 0, "file": 0}
    kind = "other_anon"
    with open("/proc/self/smaps") as f:
        for line in f:
            parts = line.split()
            if re.fullmatch(r"[0-9a-f]+-[0-9a-f]+", parts[0]):
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                name = parts[5] if len(parts) > 5 else ""
                if name == "[heap]":
                    kind = "heap"
                elif name and not name.startswith("["):
                    kind = "file"
                elif not name and hi - lo >= 64 * 2**20:
                    kind = "mimalloc"
                else:
                    kind = "other_anon"
            elif parts[0] == "Rss:":
                kb[kind] += int(parts[1])
    return {k: round(v / 1024, 1) for k, v in kb.items()}


def _sample(libc: ctypes.CDLL, t0: float) -> dict[str, Any]:
    info = libc.mallinfo2()
    with open("/proc/self/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    times = os.times()
    return {"t": round(time.monotonic() - t0), "rss": round(rss / 1024, 1),
            "cpu_s": round(times.user + times.system, 1),
            "glibc_arena": round(info.arena / 2**20, 1),
            "glibc_inuse": round(info.uordblks / 2**20, 1),
            "glibc_free": round(info.fordblks / 2**20, 1),
            "glibc_mmap": round(info.hblkhd / 2**20, 1), **_pymalloc(), **_mappings()}


def _traced(frames: int) -> dict[str, Any]:
    """The call sites holding most of Python's traced memory now."""
    import tracemalloc

    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)])
    top = snapshot.statistics("traceback")[:12]
    return {"traced_mb": round(tracemalloc.get_traced_memory()[0] / 2**20, 1),
            "top": [{"mb": round(s.size / 2**20, 2), "n": s.count,
                     "at": [f"{f.filename.rsplit('/site-packages/', 1)[-1]}:{f.lineno}"
                            for f in s.traceback][:frames]} for s in top]}


def _loop(path: str) -> None:
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = _MallInfo2
    t0 = time.monotonic()
    while True:
        time.sleep(10)
        try:
            row = _sample(libc, t0)
            if _FRAMES:
                row |= _traced(_FRAMES)
        except Exception as exc:  # a diagnostic: say so and go on
            row = {"error": repr(exc)}
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")


_FRAMES = int(os.environ.get("EDGESYNC_MEMDIAG_TRACE") or 0)

if (_path := os.environ.get("EDGESYNC_MEMDIAG")) and _is_serve():
    if _FRAMES:
        import tracemalloc

        tracemalloc.start(_FRAMES)
    threading.Thread(target=_loop, args=(_path,), daemon=True, name="memdiag").start()
