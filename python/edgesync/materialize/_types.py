"""Target column types for SQLite affinities."""

from __future__ import annotations

__all__ = ["PG_TYPES", "pg_type_for"]

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
