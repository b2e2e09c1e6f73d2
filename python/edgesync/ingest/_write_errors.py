"""Database errors of a write into a target that stage the batch instead of failing it.

They are permanent for that batch (a value PostgreSQL refuses, a constraint, a target
altered or dropped by hand): the batch is staged with ``materialization_failed`` and
stays visible, rather than being retried for ever. Anything else (a lost connection,
a serialization failure) propagates, and the consumer retries the message.
"""

from __future__ import annotations

import asyncpg

__all__ = ["WRITE_ERRORS"]

WRITE_ERRORS = (asyncpg.DataError, asyncpg.IntegrityConstraintViolationError,
                asyncpg.UndefinedColumnError, asyncpg.UndefinedTableError,
                asyncpg.WrongObjectTypeError)
