"""Target columns: their types for SQLite affinities, and their COPY formats."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["PG_TYPES", "MirrorColumn", "copy_format", "copy_stream", "pg_type_for"]


@dataclass(frozen=True, slots=True)
class MirrorColumn:
    """A mirrored column of a target: device column ``source`` in ``target``."""

    source: str
    target: str
    pg_type: str
    # The column's type in the target table as last read from the catalog; None when
    # not read.
    stored_type: str | None = None

# NUMERIC affinity holds dates, booleans and decimals alike on SQLite, so it lands in
# text (lossless); an operator may choose another type in the column action.
_BY_AFFINITY = {
    "INTEGER": "bigint",
    "REAL": "double precision",
    "TEXT": "text",
    "BLOB": "bytea",
    "NUMERIC": "text",
}
PG_TYPES = frozenset({"bigint", "double precision", "text", "bytea", "numeric", "jsonb",
                      "boolean"})


def pg_type_for(affinity: str) -> str:
    return _BY_AFFINITY.get(affinity.upper(), "text")


def copy_format(columns: Sequence[tuple[str, str]]) -> Literal["binary", "text"]:
    """COPY binary unless a column is ``numeric`` (whose wire form the Rust encoder does
    not write): the server then copies fixed-width values instead of parsing text."""
    return "text" if any(t == "numeric" for _, t in columns) else "binary"


# COPY binary: an 11-byte signature, 4 bytes of flags and 4 of header extension
# length, then the tuples, then a 2-byte trailer (-1).
_BINARY_HEADER = 19
_BINARY_TRAILER = 2


# A group's COPY goes to the server in pieces of about this size: the parts are never
# joined into one buffer (asyncpg copies a buffer source whole into one message, so a
# group of 127 state batches held its 1.2 MB of COPY data three times).
_COPY_CHUNK_BYTES = 256 * 1024


async def copy_stream(parts: Sequence[bytes], fmt: str,
                      chunk_bytes: int = _COPY_CHUNK_BYTES
                      ) -> AsyncIterator[bytes | memoryview]:
    """Several COPY streams of one format and layout as one stream (one COPY for many
    batches), in chunks of about ``chunk_bytes`` (a part is never split): an asyncpg
    ``copy_to_table`` source (which takes any buffer, though typed as bytes)."""
    binary = fmt != "text" and len(parts) > 1
    pending: list[memoryview] = []
    size = 0
    for i, part in enumerate(parts):
        view = memoryview(part)
        if binary:  # one header (the first part's) and one trailer (the last part's)
            view = view[_BINARY_HEADER if i else 0:
                        len(part) - (_BINARY_TRAILER if i < len(parts) - 1 else 0)]
        pending.append(view)
        size += len(view)
        if size >= chunk_bytes:
            yield _joined(pending)
            pending, size = [], 0
    if pending:
        yield _joined(pending)


def _joined(pieces: list[memoryview]) -> bytes | memoryview:
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)  # one: no copy
