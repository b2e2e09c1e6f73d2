"""PostgreSQL identifiers built from device-supplied names.

Names are never interpolated raw: they are checked, bounded to PostgreSQL's
63-byte limit (longer ones get a hash suffix so two long names cannot collide
after truncation) and always double-quoted.
"""

from __future__ import annotations

import hashlib
import re

from edgesync.errors import IdentifierError

__all__ = ["MAX_IDENT_BYTES", "PLATFORM_COLUMNS", "SYSTEM_COLUMNS", "check_column_name",
           "quote_ident", "target_table_name"]

MAX_IDENT_BYTES = 63
# Columns edgesync adds to every state table; a mirrored column may not take these names.
PLATFORM_COLUMNS = ("device_id", "_edge_pk_hash", "_edge_journal_epoch", "_edge_commit_seq",
                    "_edge_deleted", "_edge_synced_at")
# PostgreSQL's own system columns: every table has them, so CREATE TABLE / ALTER TABLE
# refuses a user column of the same name ("column name conflicts with a system column").
# Quoted identifiers are case-sensitive, so only these exact spellings clash.
SYSTEM_COLUMNS = ("tableoid", "xmin", "cmin", "xmax", "cmax", "ctid")
_SAFE = re.compile(r"[^a-z0-9_]+")


def quote_ident(name: str) -> str:
    if not name or "\x00" in name:
        raise IdentifierError(f"empty identifier or NUL byte in {name!r}")
    if len(name.encode()) > MAX_IDENT_BYTES:
        raise IdentifierError(f"identifier {name!r} is longer than {MAX_IDENT_BYTES} bytes")
    return '"' + name.replace('"', '""') + '"'


def target_table_name(prefix: str, source_table: str) -> str:
    """``{prefix}{table}`` with the table folded to ``[a-z0-9_]``; names that had to be
    folded or truncated get a short hash of the original so distinct tables stay distinct."""
    folded = _SAFE.sub("_", source_table.lower()).strip("_") or "t"
    name = prefix + folded
    if folded == source_table and len(name.encode()) <= MAX_IDENT_BYTES:
        return name
    digest = hashlib.sha256(source_table.encode()).hexdigest()[:8]
    room = MAX_IDENT_BYTES - len(prefix) - len(digest) - 1
    if room < 1:
        raise IdentifierError(f"prefix {prefix!r} leaves no room for a table name")
    return f"{prefix}{folded[:room]}_{digest}"


def check_column_name(name: str, *, field: str) -> str:
    """A mirror column name: within the byte limit and not one of ours."""
    if not name or "\x00" in name:
        raise IdentifierError(f"{field}: empty column name or NUL byte")
    if len(name.encode()) > MAX_IDENT_BYTES:
        raise IdentifierError(
            f"{field}: column {name!r} is longer than {MAX_IDENT_BYTES} bytes; "
            "give it a shorter mirror_column_name")
    if name in PLATFORM_COLUMNS or name.startswith("_edge_"):
        raise IdentifierError(f"{field}: column {name!r} is reserved for edgesync")
    if name in SYSTEM_COLUMNS:
        raise IdentifierError(f"{field}: column {name!r} is a PostgreSQL system column; "
                              "give it a mirror_column_name")
    return name
