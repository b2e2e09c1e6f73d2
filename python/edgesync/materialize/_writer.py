"""Writing many batches of many devices at once: one COPY per target table and layout.

Both live ingest (``edgesync.ingest``) and replay (``edgesync.staging``) write through
``write_batches``, and isolate a batch PostgreSQL refuses with ``split_on``.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import asyncpg

from edgesync._core import RowBatch, TelemetryBatch
from edgesync.errors import BatchRejected
from edgesync.materialize._state_target import StateTarget
from edgesync.materialize._ts_target import TsRows, TsTarget
from edgesync.store import Conn

__all__ = ["WRITE_ERRORS", "WriteItem", "split_on", "write_batches"]

# PostgreSQL refusing the data (a value, a constraint, a target altered or dropped by
# hand): permanent for that batch, unlike a lost connection.
WRITE_ERRORS: tuple[type[Exception], ...] = (
    asyncpg.DataError, asyncpg.IntegrityConstraintViolationError,
    asyncpg.UndefinedColumnError, asyncpg.UndefinedTableError, asyncpg.WrongObjectTypeError)

T = TypeVar("T")


@dataclass(slots=True, eq=False)
class WriteItem:
    """One batch for its approved target (a state target; telemetry batches are written
    to the ``TsTarget`` of the same table and bindings)."""

    device_id: uuid.UUID
    batch: RowBatch | TelemetryBatch
    target: StateTarget
    # Why this batch was not written (a value that does not fit its column).
    error: str | None = None
    # Cloud-authoritative targets: keys whose device change lost to a newer cloud write.
    conflicts: list[str] = field(default_factory=list)


async def write_batches(conn: Conn, items: Sequence[WriteItem]) -> None:
    """Write ``items`` in the caller's transaction. Every batch is encoded first: one
    with a value that does not fit gets ``error`` and is not written, before anything
    else is. A PostgreSQL error raises (the caller splits, see ``split_on``)."""
    state: dict[tuple[str, str], list[tuple[WriteItem, bytes]]] = defaultdict(list)
    telemetry: dict[tuple[object, ...], list[tuple[TsTarget, TsRows]]] = defaultdict(list)
    alone: list[tuple[WriteItem, bytes]] = []
    for item in items:
        try:
            if isinstance(item.batch, TelemetryBatch):
                t = item.target
                ts = TsTarget(t.table, sorted(t.columns, key=lambda c: c.target), t.mapped)
                rows = ts.encode(item.device_id, item.batch)
                telemetry[(ts.table, tuple(ts.columns), tuple(ts.mapped),
                           ts.copy_format)].append((ts, rows))
            else:
                copy = item.target.encode(item.device_id, item.batch)
                if item.target.plain:
                    state[(item.target.table, item.target.layout)].append((item, copy))
                else:
                    alone.append((item, copy))
        except BatchRejected as exc:
            item.error = str(exc)
    used: set[str] = set()
    for parts in state.values():
        batches = [(i.batch, c) for i, c in parts if isinstance(i.batch, RowBatch)]
        await parts[0][0].target.write_group(conn, batches, used)
    for tparts in telemetry.values():
        await tparts[0][0].write_group(conn, [rows for _, rows in tparts])
    for item, copy in alone:
        assert isinstance(item.batch, RowBatch)
        await item.target.apply_encoded(conn, item.device_id, item.batch, copy)
        item.conflicts = list(item.target.conflicts)


async def split_on(errors: tuple[type[Exception], ...], items: list[T],
                   attempt: Callable[[list[T]], Awaitable[None]],
                   alone: Callable[[T, Exception], Awaitable[None]]) -> None:
    """``attempt(items)``; when it raises one of ``errors``, try each half again, down
    to the one item, which goes to ``alone(item, error)``. Halves, not singles: one
    poisoned item among n costs about 2·log2(n) attempts, and the others still share
    theirs."""
    try:
        await attempt(items)
    except errors as exc:
        if len(items) == 1:
            await alone(items[0], exc)
            return
        mid = len(items) // 2
        await split_on(errors, items[:mid], attempt, alone)
        await split_on(errors, items[mid:], attempt, alone)
