"""Database errors that say nothing about the data: try the same work again later."""

from __future__ import annotations

import asyncpg

__all__ = ["CONCURRENCY_ERRORS", "TRANSIENT_ERRORS", "collided"]

# Concurrent transactions colliding: a deadlock, a serialization failure, a lock not
# granted in time, or an object another transaction created first. Tried again in a new
# transaction, the work sees the other's commit and usually passes; one that fails this
# way every time is a bug, not a race (callers bound their retries).
CONCURRENCY_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.DeadlockDetectedError,
    asyncpg.SerializationError,
    asyncpg.LockNotAvailableError,
    asyncpg.DuplicateTableError,
    asyncpg.DuplicateObjectError,
    asyncpg.DuplicateColumnError,
)

# A lost or refused connection (PostgreSQL restarting, a fail-over, too many clients),
# a connection left in a bad state by one (asyncpg's "cannot switch to state"), and
# the conflicts of concurrent writers.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresConnectionError,
    asyncpg.OperatorInterventionError,
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.InternalClientError,
    asyncpg.TooManyConnectionsError,
    ConnectionError,
    OSError,
    TimeoutError,
    *CONCURRENCY_ERRORS,
)


def collided(exc: BaseException) -> bool:
    """``exc`` is a collision of concurrent transactions: one of ``CONCURRENCY_ERRORS``,
    or a unique violation in the system catalogs (two sessions creating an object of the
    same name without a lock between them: ``pg_type_typname_nsp_index``). A unique
    violation of a user table is the data's, not a collision."""
    if isinstance(exc, CONCURRENCY_ERRORS):
        return True
    return (isinstance(exc, asyncpg.UniqueViolationError)
            and str(getattr(exc, "table_name", None) or "").startswith("pg_"))
