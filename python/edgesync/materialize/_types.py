"""Target columns: their types for SQLite affinities, and their COPY formats."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["PG_TYPES", "MirrorColumn", "copy_format", "join_copy", "pg_type_for"]


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


def join_copy(parts: Sequence[bytes], fmt: str) -> memoryview:
    """Several COPY streams of one format and layout as one stream (one COPY for many
    batches). A memoryview: asyncpg would take plain bytes for a file path."""
    if len(parts) == 1:
        return memoryview(parts[0])
    if fmt == "text":
        return memoryview(b"".join(parts))
    body = [memoryview(p)[_BINARY_HEADER:len(p) - _BINARY_TRAILER] for p in parts]
    first = parts[0]
    return memoryview(b"".join([first[:_BINARY_HEADER], *body, first[-_BINARY_TRAILER:]]))
