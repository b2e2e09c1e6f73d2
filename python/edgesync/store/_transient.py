"""Database errors that say nothing about the data: try the same work again later."""

from __future__ import annotations

import asyncpg

__all__ = ["TRANSIENT_ERRORS"]

# A lost or refused connection (PostgreSQL restarting, a fail-over, too many clients),
# a connection left in a bad state by one (asyncpg's "cannot switch to state"), and
# the conflicts of concurrent writers.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresConnectionError,
    asyncpg.OperatorInterventionError,
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.InternalClientError,
    asyncpg.DeadlockDetectedError,
    asyncpg.SerializationError,
    asyncpg.TooManyConnectionsError,
    ConnectionError,
    OSError,
    TimeoutError,
)
