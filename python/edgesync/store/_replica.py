"""Replicated commits: whether a standby has replayed what this primary committed.

``edgesync serve --confirm-after-replica`` confirms to a device only batches whose
commit a standby has replayed. With asynchronous streaming replication a commit the
primary acknowledged may never reach the standby that gets promoted; a device told
"committed" would truncate its journal and those rows would be gone for ever. Holding
the confirmation until ``pg_stat_replication.replay_lsn`` has passed the commit keeps
them in the journal, so the agent sends them again to the new primary.

Reading ``replay_lsn`` of other sessions needs the ``pg_monitor`` role (or superuser):
``check_replica_visibility`` refuses to start without it, or every confirmation would
wait for ever on a NULL.
"""

from __future__ import annotations

import asyncio
import logging
import time

from edgesync.errors import ConfigError
from edgesync.store._conn import Conn

__all__ = ["check_replica_visibility", "commit_position", "wait_replayed"]

_log = logging.getLogger(__name__)
_OPTION = "--confirm-after-replica"
# How often a waiting confirmation asks again, and how often it says it still waits.
_POLL = 0.05
_WARN_EVERY = 30.0


async def check_replica_visibility(conn: Conn) -> None:
    """A ConfigError unless this role may read the standbys' positions."""
    allowed = await conn.fetchval(
        "SELECT rolsuper OR pg_has_role(current_user, 'pg_monitor', 'USAGE') "
        "FROM pg_roles WHERE rolname = current_user")
    if not allowed:
        raise ConfigError(_OPTION, "the database role cannot read pg_stat_replication's "
                                   "replay_lsn: GRANT pg_monitor TO it (or drop the option)")


async def commit_position(conn: Conn) -> int:
    """A WAL position (asyncpg's pg_lsn: an int) at or after every commit this session
    can already see."""
    # The insert position, not the flushed one: an asynchronous commit is visible before
    # its WAL is flushed.
    return int(await conn.fetchval("SELECT pg_current_wal_insert_lsn()"))


async def wait_replayed(conn: Conn, lsn: int) -> float:
    """Wait until a standby streaming from this primary has replayed ``lsn``; returns the
    seconds waited. With no standby (or none keeping up) it waits as long as that lasts,
    by design, with a warning every ``_WARN_EVERY`` seconds: confirming anyway would let
    devices forget rows a failover can lose. A failed query raises (the caller's round
    fails and is tried again, from the new primary after a failover)."""
    start = warned = time.monotonic()
    while not await conn.fetchval(
            "SELECT coalesce(max(replay_lsn) >= $1::pg_lsn, false) FROM pg_stat_replication",
            lsn):
        now = time.monotonic()
        if now - warned >= _WARN_EVERY:
            warned = now
            _log.warning("confirmations held for %.0f s: no standby has replayed WAL %s yet "
                         "(%s; is the standby down or lagging?)", now - start, _text(lsn), _OPTION)
        await asyncio.sleep(_POLL)
    return time.monotonic() - start


def _text(lsn: int) -> str:
    """``lsn`` as PostgreSQL writes it (``16/B374D848``)."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"
