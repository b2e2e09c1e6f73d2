"""Target column types for SQLite affinities."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

__all__ = ["PG_TYPES", "copy_format", "pg_type_for"]

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
