"""Retention of ``edge_ts_*`` targets: dropping the day partitions before a day.

An operator's retention job (or the soak bench, ``benches/bench_soak.py``) drops whole
days: ``DROP TABLE`` of a partition frees its disk at once, where a ``DELETE`` would leave
dead rows for vacuum. The drop takes the target's DDL lock (``_ddl.lock_ddl``), the one
every path that creates a partition takes, so it never races a worker creating the day
after, or moving rows out of DEFAULT.

A worker that knew a dropped partition (``_ts_target``'s cache) sends a late row of that
day to the DEFAULT partition: nothing is refused, and the next worker start creates the
day again if its rows come.
"""

from __future__ import annotations

import re
from datetime import date

from edgesync.materialize._ddl import lock_ddl
from edgesync.materialize._identifiers import quote_ident
from edgesync.store import Conn

__all__ = ["drop_partitions_before"]

# A day partition's name ends with its day (``_ts_target._part_name``: ``…_dYYYYMMDD``,
# whatever the table's name was shortened to).
_DAY_SUFFIX = re.compile(r"_d(\d{4})(\d{2})(\d{2})$")


async def drop_partitions_before(conn: Conn, table: str, day: date) -> list[str]:
    """Drop the day partitions of ``table`` for days before ``day`` (the DEFAULT partition
    stays); returns their names, oldest first. Runs in the caller's transaction, which
    holds the table's DDL lock until it ends, and ``DROP TABLE``'s lock on the parent:
    keep that transaction short (a ``lock_timeout`` bounds how long writers wait)."""
    await lock_ddl(conn, table)
    rows = await conn.fetch(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "JOIN pg_class p ON p.oid = i.inhparent JOIN pg_namespace n ON n.oid = p.relnamespace "
        "WHERE n.nspname = current_schema() AND p.relname = $1 ORDER BY c.relname", table)
    old: list[tuple[date, str]] = []
    for r in rows:
        m = _DAY_SUFFIX.search(r["relname"])
        if m and (d := date(int(m[1]), int(m[2]), int(m[3]))) < day:
            old.append((d, r["relname"]))
    names = [name for _, name in sorted(old)]
    for name in names:
        await conn.execute(f"DROP TABLE {quote_ident(name)}")
    return names
