"""edgesync._core: compressed batches inflated within the batch limit (``inflate_batch``).

A decompression bomb must cost the worker nothing: measured in a fresh interpreter, where
the peak resident size is that of this one call, against the same interpreter inflating
a small frame."""

from __future__ import annotations

import subprocess
import sys

import pytest
import zstandard

from edgesync import _core
from edgesync.errors import BatchRejected

_PEAK = """
import resource, sys
from edgesync import _core
frame = open(sys.argv[1], "rb").read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    _core.inflate_batch(frame)
except Exception as exc:
    print(type(exc).__name__, getattr(exc, "code", ""), file=sys.stderr)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""


def _peak_kib(tmp_path, name: str, frame: bytes) -> int:
    path = tmp_path / name
    path.write_bytes(frame)
    done = subprocess.run([sys.executable, "-c", _PEAK, str(path)], capture_output=True,
                          text=True, check=True, timeout=120)
    return int(done.stdout.strip())


def test_a_bomb_costs_no_more_memory_than_a_small_batch(tmp_path) -> None:
    # 2 GiB of zeros without a content size in the header, so only the inflating can
    # stop it: a 64 KiB frame.
    bomb = zstandard.ZstdCompressor(level=3, write_content_size=False).compress(
        b"\0" * (256 << 20))
    bomb = b"".join([bomb] * 8)  # eight frames one after another: 2 GiB
    assert len(bomb) < 1 << 20
    with pytest.raises(BatchRejected) as caught:
        _core.inflate_batch(bomb)
    assert caught.value.code == "payload_too_large"
    small = _core.compress_blob(b"{}", 3)
    grown_bomb = _peak_kib(tmp_path, "bomb.zst", bomb)
    grown_small = _peak_kib(tmp_path, "small.zst", small)
    # The limit (512 KiB) and one 128 KiB chunk, with room for the allocator's own.
    assert grown_bomb - grown_small < 8 * 1024, (grown_bomb, grown_small)


def test_inflates_exactly_the_frame_and_takes_buffers() -> None:
    json = b'{"rows": []}'
    frame = _core.compress_blob(json, 3)
    assert frame[:4] == _core.ZSTD_MAGIC
    assert _core.inflate_batch(frame) == json
    assert _core.inflate_batch(memoryview(frame)) == json
    assert _core.inflate_batch(bytearray(frame), 12) == json
    with pytest.raises(BatchRejected) as caught:
        _core.inflate_batch(frame, 11)
    assert caught.value.code == "payload_too_large"


def test_a_larger_limit_for_uploaded_chunks() -> None:
    big = b" " * (_core.MAX_BATCH_BYTES + 10)
    frame = _core.compress_blob(big, 3)
    with pytest.raises(BatchRejected):
        _core.inflate_batch(frame)
    assert _core.inflate_batch(frame, len(big)) == big


def test_corrupt_frames_are_malformed_json() -> None:
    frame = _core.compress_blob(b"x" * 10_000, 3)
    for bad in (frame[:4], frame[:-1], frame + b"{}", _core.ZSTD_MAGIC + b"\0" * 20):
        with pytest.raises(BatchRejected) as caught:
            _core.inflate_batch(bad)
        assert caught.value.code == "malformed_json", bad[:8]
