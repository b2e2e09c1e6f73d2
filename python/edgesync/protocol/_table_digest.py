"""The table digest of ``verify_table`` (docs/protocol.md, "Table digest"), one code path
for the device (over its SQLite rows) and the cloud (over its mirror).

A row is hashed over the named columns only, in the order the control lists them, each
value in one canonical encoding: a tag byte, the payload's length (4 bytes, big-endian),
the payload —

* ``n`` NULL (empty payload), ``i`` an integer (its decimal text), ``f`` a double (its
  8 IEEE-754 bytes, big-endian), ``s`` text (UTF-8), ``b`` a blob (its bytes).

A column the control marks ``"text": true`` (a SQLite NUMERIC column, mirrored as
``text``) is hashed as the text the cloud stores: an integer as its decimal text, a
double as its shortest JSON text (as the agent sends it), text as itself.

``row_hash = SHA-256(pk_hash ‖ 0x00 ‖ encoded values)``; a row falls in the bucket named
by the first ``prefix`` hex digits of its ``_edge_pk_hash``; a bucket is its row count and
the sum of its rows' hashes (the first 16 bytes as an integer) modulo 2^128 — independent
of row order, so neither side sorts.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["DIGEST_VERSION", "MAX_PREFIX", "TableDigest", "differing_buckets", "encode_value",
           "pk_json"]

DIGEST_VERSION = 1
MAX_PREFIX = 3  # 4,096 buckets: a digest stays under ~200 KB
_MOD = 1 << 128


def _field(tag: bytes, payload: bytes) -> bytes:
    return tag + len(payload).to_bytes(4, "big") + payload


def _text_of(value: Any) -> str:
    if isinstance(value, float):
        return orjson.dumps(value).decode()  # shortest round trip, as the agent's JSON
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex().upper()
    return str(value)


def encode_value(value: Any, *, as_text: bool = False) -> bytes:
    """One value in the canonical encoding (see the module docstring)."""
    if value is None:
        return _field(b"n", b"")
    if as_text:
        return _field(b"s", _text_of(value).encode())
    if isinstance(value, bool):
        return _field(b"i", b"1" if value else b"0")
    if isinstance(value, int):
        return _field(b"i", str(value).encode())
    if isinstance(value, float):
        return _field(b"f", struct.pack(">d", value))
    if isinstance(value, str):
        return _field(b"s", value.encode())
    if isinstance(value, bytes | bytearray | memoryview):
        return _field(b"b", bytes(value))
    return _field(b"s", str(value).encode())


def pk_json(names: Sequence[str], values: Sequence[Any]) -> bytes:
    """A row's ``pk`` object as the agent writes it (blobs as ``{"$blob": HEX}``), the input
    of ``_core.pk_hash``."""
    return orjson.dumps({n: ({"$blob": bytes(v).hex().upper()}
                             if isinstance(v, bytes | bytearray | memoryview) else v)
                         for n, v in zip(names, values, strict=True)})


@dataclass(slots=True)
class TableDigest:
    """Buckets of one side: ``add`` every live row, then ``buckets()``."""

    prefix: int
    text_columns: frozenset[int] = frozenset()
    rows: int = 0
    _count: dict[str, int] = field(default_factory=dict)
    _sum: dict[str, int] = field(default_factory=dict)

    def add(self, pk_hash: str, values: Iterable[Any]) -> str:
        """Add one row; returns its bucket."""
        h = hashlib.sha256(pk_hash.encode())
        h.update(b"\0")
        for i, v in enumerate(values):
            h.update(encode_value(v, as_text=i in self.text_columns))
        bucket = pk_hash[:self.prefix]
        self._count[bucket] = self._count.get(bucket, 0) + 1
        self._sum[bucket] = (self._sum.get(bucket, 0)
                             + int.from_bytes(h.digest()[:16], "big")) % _MOD
        self.rows += 1
        return bucket

    def buckets(self) -> dict[str, list[Any]]:
        """``{bucket: [rows, sum as 32 hex digits]}`` of the non-empty buckets."""
        return {b: [self._count[b], f"{self._sum[b]:032x}"] for b in sorted(self._count)}


def differing_buckets(device: dict[str, Any], cloud: dict[str, Any]) -> list[str]:
    """The buckets whose row count or sum differ (a bucket empty on one side included)."""
    return sorted(b for b in set(device) | set(cloud) if device.get(b) != cloud.get(b))
