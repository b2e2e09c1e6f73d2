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

__all__ = ["ReplicaGate", "check_replica_visibility"]

_log = logging.getLogger(__name__)
_OPTION = "--confirm-after-replica"
# How often a waiting confirmation asks again, and how often it says it still waits.
_POLL = 0.02
_WARN_EVERY = 30.0


async def check_replica_visibility(conn: Conn) -> None:
    """A ConfigError unless this role may read the standbys' positions."""
    allowed = await conn.fetchval(
        "SELECT rolsuper OR pg_has_role(current_user, 'pg_monitor', 'USAGE') "
        "FROM pg_roles WHERE rolname = current_user")
    if not allowed:
        raise ConfigError(_OPTION, "the database role cannot read pg_stat_replication's "
                                   "replay_lsn: GRANT pg_monitor TO it (or drop the option)")


class ReplicaGate:
    """Lets a round of confirmations through once a standby has replayed every commit the
    round saw. With no standby (or none keeping up) the round is held — by design:
    confirming anyway would let devices forget rows a failover can lose — and the holder
    tries again next round; a warning says so every ``_WARN_EVERY`` seconds."""

    def __init__(self, *, within: float = 1.0) -> None:
        self._within = within
        self._held_since: float | None = None
        self._warned = 0.0

    async def passed(self, conn: Conn) -> bool:
        """True once a standby streaming from this primary has replayed every commit
        ``conn`` can already see (waiting up to ``within`` seconds); a failed query raises
        (the caller's round fails and is tried again, on the new primary after a
        failover)."""
        # The insert position, not the flushed one: an asynchronous commit is visible
        # before its WAL is flushed. asyncpg gives pg_lsn as an int.
        lsn = int(await conn.fetchval("SELECT pg_current_wal_insert_lsn()"))
        deadline = time.monotonic() + self._within
        while not await conn.fetchval("SELECT coalesce(max(replay_lsn) >= $1, false) "
                                      "FROM pg_stat_replication", lsn):
            now = time.monotonic()
            if now < deadline:
                await asyncio.sleep(_POLL)
                continue
            if self._held_since is None:
                self._held_since = now
            if now - self._warned >= _WARN_EVERY:
                self._warned = now
                _log.warning("confirmations held for %.0f s: no standby has replayed WAL %s "
                             "yet (%s; is the standby down or lagging?)",
                             now - self._held_since, _text(lsn), _OPTION)
            return False
        if self._held_since is not None:
            _log.info("confirmations resume: a standby replayed WAL %s after %.0f s",
                      _text(lsn), time.monotonic() - self._held_since)
            self._held_since, self._warned = None, 0.0
        return True


def _text(lsn: int) -> str:
    """``lsn`` as PostgreSQL writes it (``16/B374D848``)."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"
