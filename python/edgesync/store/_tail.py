"""A transaction whose last statements travel with its COMMIT.

Each statement is a round trip, and at half load a round trip costs a group about
0.4 ms of waiting (its backend and the worker's loop each wait for a core), whatever
the statement does. The statements whose results nobody reads — the state upsert, the
ledger's settle — need not wait for one of their own: ``CommitTail.defer`` keeps them,
and ``committing`` sends them with the ``COMMIT`` as one simple query (measured at half
load: upsert, settle and COMMIT were three round trips and 9.4 of a group's 15.5 ms).

An error of a deferred statement surfaces at the commit, as if it had run then: the
transaction rolls back whole, as it would have anyway. A statement that needs a deferred
one's effect first calls ``flush``.

The other end works alike: idempotent statements the previous transactions needed
(``ensure``: the staging tables' ``CREATE TEMP TABLE IF NOT EXISTS``) can travel with
the ``BEGIN`` (``prelude``), where they cost no round trip of their own.

The simple query protocol takes no parameters, so a deferred statement carries its
values as literals (``array_literal``): only values edgesync made itself — ids, counts,
identifiers it quoted — never a device's text.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Literal

from edgesync.store._conn import Conn

__all__ = ["CommitTail", "array_literal", "committing"]


class CommitTail:
    """The deferred statements of one transaction (see the module's docstring)."""

    def __init__(self, prelude: Sequence[str] = ()) -> None:
        self._sql: list[str] = []
        self.prelude = tuple(prelude)
        # The idempotent statements this transaction needed (for a later prelude).
        self.ensured: list[str] = []

    def __len__(self) -> int:
        return len(self._sql)

    def defer(self, sql: str) -> None:
        self._sql.append(sql)

    async def ensure(self, conn: Conn, sql: str) -> None:
        """Run the idempotent statement ``sql`` unless the BEGIN carried it already."""
        if sql not in self.ensured:
            self.ensured.append(sql)
        if sql not in self.prelude:
            await conn.execute(sql)

    async def flush(self, conn: Conn) -> None:
        """Run the deferred statements now (one round trip)."""
        if self._sql:
            sql, self._sql = ";\n".join(self._sql), []
            await conn.execute(sql)

    async def _commit(self, conn: Conn) -> None:
        sql, self._sql = ";\n".join([*self._sql, "COMMIT"]), []
        await conn.execute(sql)


@contextlib.asynccontextmanager
async def committing(conn: Conn, prelude: Sequence[str] = ()) -> AsyncIterator[CommitTail]:
    """``BEGIN`` and the ``prelude`` (idempotent statements, see ``CommitTail.ensure``)
    in one round trip; on leaving, the tail's statements and ``COMMIT`` in one,
    or ``ROLLBACK`` when the block (or a deferred statement) raised. No
    ``conn.transaction()`` inside: asyncpg refuses a savepoint in a transaction it did
    not begin (the group writer's rows-apart path, which needs savepoints, takes
    asyncpg's own transaction)."""
    tail = CommitTail(prelude)
    try:
        # (A prelude statement that fails leaves the transaction begun: rolled back below.)
        await conn.execute(";\n".join(["BEGIN", *prelude]))
        yield tail
        await tail._commit(conn)
    except BaseException:
        # A lost connection cannot roll back: the error that lost it is the one to
        # raise (the server rolled back when the connection went).
        with contextlib.suppress(Exception):
            if not conn.is_closed() and conn.is_in_transaction():
                await conn.execute("ROLLBACK")
        raise


def array_literal(values: Iterable[uuid.UUID] | Iterable[int],
                  pg_type: Literal["uuid", "bigint", "int"]) -> str:
    """An SQL array literal of ``values``: UUIDs or integers only, each checked."""
    if pg_type == "uuid":
        items = [str(_uuid(v)) for v in values]
    else:
        items = [str(int(_int(v))) for v in values]
    return "'{" + ",".join(items) + "}'::" + pg_type + "[]"


def _uuid(v: object) -> uuid.UUID:
    if not isinstance(v, uuid.UUID):
        raise TypeError(f"array_literal: {v!r} is not a UUID")
    return v


def _int(v: object) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(f"array_literal: {v!r} is not an integer")
    return v
