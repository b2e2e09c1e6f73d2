"""edgesync._core: zstd blobs, interoperable with the ``zstandard`` package."""

from __future__ import annotations

import io
import os

import pytest
import zstandard

from edgesync import _core
from edgesync.errors import BlobError

DATA = b"".join(b"row %d: temperature=%d\n" % (i, i % 37) for i in range(20_000)) + os.urandom(4096)


def test_roundtrip() -> None:
    z = _core.compress_blob(DATA)
    assert len(z) < len(DATA)
    assert _core.decompress_blob(z) == DATA
    assert _core.decompress_blob(_core.compress_blob(b"")) == b""


def test_accepts_buffers() -> None:
    z = _core.compress_blob(bytearray(DATA), level=1)
    assert _core.decompress_blob(memoryview(z)) == DATA


def test_rust_compress_zstandard_decompress() -> None:
    z = _core.compress_blob(DATA, level=9)
    params = zstandard.get_frame_parameters(z)
    assert params.content_size == len(DATA)
    assert params.has_checksum
    assert zstandard.ZstdDecompressor().decompress(z) == DATA


def test_zstandard_compress_rust_decompress() -> None:
    z = zstandard.ZstdCompressor(level=5).compress(DATA)
    assert zstandard.get_frame_parameters(z).content_size == len(DATA)
    assert _core.decompress_blob(z) == DATA


def test_zstandard_streaming_frame_without_content_size() -> None:
    buf = io.BytesIO()
    with zstandard.ZstdCompressor(level=3).stream_writer(buf, closefd=False) as writer:
        for i in range(0, len(DATA), 10_000):
            writer.write(DATA[i : i + 10_000])
    z = buf.getvalue()
    assert zstandard.get_frame_parameters(z).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert _core.decompress_blob(z) == DATA
    with pytest.raises(BlobError):
        _core.decompress_blob(z, max_size=len(DATA) - 1)


def test_max_size_enforced() -> None:
    z = _core.compress_blob(DATA)
    assert _core.decompress_blob(z, max_size=len(DATA)) == DATA
    with pytest.raises(BlobError):
        _core.decompress_blob(z, max_size=len(DATA) - 1)
    with pytest.raises(BlobError):
        _core.decompress_blob(_core.compress_blob(b"x" * 10_000_000), max_size=1 << 20)


@pytest.mark.parametrize(
    "mangle",
    [
        lambda z: b"",
        lambda z: b"definitely not zstd",
        lambda z: z[: len(z) // 2],
        lambda z: z[:-1],
        lambda z: z + b"trailing",
        lambda z: z[: len(z) // 2] + bytes([z[len(z) // 2] ^ 0xFF]) + z[len(z) // 2 + 1 :],
    ],
)
def test_corrupt_blob(mangle: object) -> None:
    z = _core.compress_blob(DATA)
    assert callable(mangle)
    with pytest.raises(BlobError):
        _core.decompress_blob(mangle(z))


def test_bad_level() -> None:
    with pytest.raises(BlobError):
        _core.compress_blob(b"x", level=1000)
