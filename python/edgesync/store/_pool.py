"""Connection pools with the codecs edgesync relies on."""

from __future__ import annotations

import contextlib
from typing import Any

import asyncpg
import orjson

from edgesync.errors import StoreError
from edgesync.store._conn import Conn

__all__ = ["create_pool", "unlock_session_lock"]



async def _reset(conn: asyncpg.Connection) -> None:
    """What the pool does to a connection that comes back: nothing on the server.

    asyncpg has already done the client-side part (a transaction left open rolled back,
    listener callbacks dropped). Its default reset query (unlock all, CLOSE ALL,
    UNLISTEN *, RESET ALL) on every release was ~5% of the worker's CPU at 10,000 devices
    (py-spy) and a round trip before each group's lane was free again. edgesync never
    SETs a session variable or keeps a cursor past its transaction (the staging temp
    tables are meant to stay), and the code that takes session state gives it back or
    closes the connection: ``listen_loop`` UNLISTENs, ``alone`` and ``migrate`` unlock
    their advisory lock — each terminates the connection when that did not happen."""


async def unlock_session_lock(conn: Conn, key: int) -> None:
    """Give back the session-level advisory lock ``key``; when that fails (the
    connection broke, a stop came), close the connection instead, so that no other
    caller of the pool inherits the lock (see ``_reset``)."""
    unlocked = False
    try:
        await conn.execute("SELECT pg_advisory_unlock($1)", key)
        unlocked = True
    finally:
        if not unlocked:
            with contextlib.suppress(Exception):  # closed, or detached from its proxy
                conn.terminate()


async def _init_connection(conn: Conn) -> None:
    for typ in ("json", "jsonb"):
        await conn.set_type_codec(
            typ,
            encoder=lambda v: orjson.dumps(v).decode(),
            decoder=orjson.loads,
            schema="pg_catalog",
        )


async def create_pool(dsn: str, *, min_size: int = 1, max_size: int = 10,
                      **kwargs: Any) -> asyncpg.Pool:
    try:
        pool = await asyncpg.create_pool(
            dsn, min_size=min_size, max_size=max_size, init=_init_connection,
            reset=_reset, **kwargs
        )
    except (OSError, asyncpg.PostgresError) as exc:
        raise StoreError(f"cannot connect to PostgreSQL at {_redact(dsn)}: {exc}") from exc
    except asyncpg.ClientConfigurationError as exc:  # a DSN asyncpg cannot parse
        raise StoreError(f"not a usable PostgreSQL URL {_redact(dsn)}: {exc}") from exc
    assert pool is not None
    return pool


def _redact(dsn: str) -> str:
    head, sep, tail = dsn.partition("@")
    if not sep or ":" not in head.split("//", 1)[-1]:
        return dsn
    scheme, _, cred = head.partition("//")
    user = cred.split(":", 1)[0]
    return f"{scheme}//{user}:***@{tail}"
