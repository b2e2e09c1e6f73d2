"""The steps every batch message takes, whatever its kind.

1. A redelivery of an accepted batch is answered from the ledger before decoding.
2. Decoding and validation (Rust); a rejection is recorded in the ledger.
3. The batch is accepted in one transaction (ledger row, governance, write).

A database error of the write (``WRITE_ERRORS``: a value PostgreSQL refuses, a
constraint, a target altered or dropped by hand) is permanent for that batch: the
transaction is rolled back and the batch accepted again as staged with
``materialization_failed``, visible and replayable, rather than retried for ever. No
savepoint guards the happy path: it would cost two round trips per batch. Anything else
(a lost connection, a serialization failure) propagates and the consumer retries.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import asyncpg

from edgesync.errors import BatchRejected
from edgesync.ingest._ledger import record_rejection, redelivered
from edgesync.ingest._outcome import IngestOutcome, OutcomeStatus
from edgesync.registry import DeviceScope
from edgesync.store import Conn

__all__ = ["WRITE_ERRORS", "ingest_batch"]

_log = logging.getLogger("edgesync.ingest")

WRITE_ERRORS = (asyncpg.DataError, asyncpg.IntegrityConstraintViolationError,
                asyncpg.UndefinedColumnError, asyncpg.UndefinedTableError,
                asyncpg.WrongObjectTypeError)

B = TypeVar("B")
# accept(conn, batch, write_error): write_error is None on the first attempt.
Accept = Callable[[Conn, B, "str | None"], Awaitable[IngestOutcome]]


async def ingest_batch(conn: Conn, scope: DeviceScope, kind: str, payload: bytes,
                       decode: Callable[[bytes], B], accept: Accept[B]) -> IngestOutcome:
    seen = await redelivered(conn, scope.device_id, payload)
    if seen is not None:
        return IngestOutcome(OutcomeStatus.DUPLICATE, None, seen)
    try:
        batch = decode(payload)
    except BatchRejected as rej:
        lineage_id = await record_rejection(conn, scope.device_id, kind, payload, rej)
        _log.info("rejected %s from %s: %s", kind, scope.device_name, rej)
        return IngestOutcome(OutcomeStatus.REJECTED, rej.code, rej.detail, lineage_id)
    try:
        async with conn.transaction():
            return await accept(conn, batch, None)
    except WRITE_ERRORS as exc:
        _log.warning("writing a %s from %s failed, staging it: %s", kind, scope.device_name,
                     exc)
        async with conn.transaction():
            return await accept(conn, batch, str(exc))
