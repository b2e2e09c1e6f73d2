"""Writing many batches of many devices at once: one COPY per target table and layout.

Both live ingest and replay (``edgesync.ingest``: its one write path, ``_write``) write through
``write_batches``, and isolate a batch PostgreSQL refuses with ``split_on``; within that
one batch, ``write_rows_apart`` isolates the rows PostgreSQL refuses (savepoints, halves
again), so only they are quarantined. A row the encoder refuses is set apart before
anything is written, on the fast path too (it costs nothing until a value does not fit).
"""

from __future__ import annotations

import re
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
from edgesync.store import CommitTail, Conn

__all__ = ["LINEAGE_ERRORS", "ROW_ERRORS", "WRITE_ERRORS", "RowFailure", "WriteItem",
           "split_on", "write_batches", "write_rows_apart"]

# PostgreSQL refusing one row's data (a value out of range, a constraint): that row is
# quarantined, the others are written.
ROW_ERRORS: tuple[type[Exception], ...] = (
    asyncpg.DataError, asyncpg.IntegrityConstraintViolationError)
# PostgreSQL refusing the lineage's target as a whole (dropped or altered by hand,
# permission taken away): every row would fail alike, so the batch is staged
# materialization_failed and the breaker counts it.
LINEAGE_ERRORS: tuple[type[Exception], ...] = (
    asyncpg.UndefinedColumnError, asyncpg.UndefinedTableError, asyncpg.WrongObjectTypeError,
    asyncpg.InsufficientPrivilegeError)
# Either: permanent for that batch, unlike a lost connection.
WRITE_ERRORS: tuple[type[Exception], ...] = ROW_ERRORS + LINEAGE_ERRORS

# The row an encoder error names: ``rows[i].row.<column>`` / ``rows[i].fields.<column>``.
_ROW_FIELD = re.compile(r"^rows\[(\d+)\]")


@dataclass(frozen=True, slots=True)
class RowFailure:
    """A row of a batch that was not written: ``index`` in the item's batch, ``code`` a
    rejection code (the encoder) or a SQLSTATE (PostgreSQL)."""

    index: int
    code: str
    message: str
    field: str | None = None

T = TypeVar("T")


@dataclass(slots=True, eq=False)
class WriteItem:
    """One batch for its approved target (a state target; telemetry batches are written
    to the ``TsTarget`` of the same table and bindings)."""

    device_id: uuid.UUID
    batch: RowBatch | TelemetryBatch
    target: StateTarget
    # Why this batch was not written at all (an encoder error naming no row).
    error: str | None = None
    # Cloud-authoritative targets: keys whose device change lost to a newer cloud write.
    conflicts: list[str] = field(default_factory=list)
    # Rows set apart (to quarantine); the batch's other rows were written.
    refused: list[RowFailure] = field(default_factory=list)

    def _refuse(self, failure: RowFailure) -> None:
        if all(f.index != failure.index for f in self.refused):
            self.refused.append(failure)


async def write_batches(conn: Conn, items: Sequence[WriteItem],
                        used: set[str] | None = None, tail: CommitTail | None = None) -> None:
    """Write ``items`` in the caller's transaction. Every batch is encoded first: a row
    with a value that does not fit is set apart (``refused``) and the batch's other rows
    are encoded again without it, before anything is written (a refusal naming no row
    gives the item ``error``: nothing of it is written). A PostgreSQL error raises (the
    caller splits, see ``split_on``). ``used``: the staging tables of this transaction
    (``StateTarget.write_group``). ``tail``: the state upserts run with the COMMIT
    (``store.committing``); a PostgreSQL error of theirs is raised there."""
    state: dict[tuple[str, str], tuple[StateTarget, list[tuple[RowBatch, bytes]]]] = {}
    # Devices of each state write: a group's rows have distinct keys when each batch's
    # keys are distinct and no device has two batches in it.
    devices: dict[tuple[str, str], set[uuid.UUID]] = defaultdict(set)
    repeated: set[tuple[str, str]] = set()
    # By target: lineages of one table and columns share one (StateTarget.telemetry).
    telemetry: dict[TsTarget, list[TsRows]] = defaultdict(list)
    alone: list[tuple[WriteItem, RowBatch, bytes]] = []
    for item in items:
        if isinstance(item.batch, TelemetryBatch):
            ts = item.target.telemetry
            encoded = _encode(item, ts)
            if encoded is not None:
                rows = encoded[1]
                assert isinstance(rows, TsRows)
                telemetry[ts].append(rows)
            continue
        encoded = _encode(item, None)
        if encoded is None:
            continue
        batch, copy = encoded
        assert isinstance(batch, RowBatch) and isinstance(copy, bytes)
        if item.target.plain:
            key = (item.target.table, item.target.layout)
            if key not in state:
                state[key] = (item.target, [])
            state[key][1].append((batch, copy))
            if item.device_id in devices[key]:
                repeated.add(key)
            devices[key].add(item.device_id)
        else:
            alone.append((item, batch, copy))
    used = set() if used is None else used
    for key, (target, parts) in state.items():
        await target.write_group(conn, parts, used, distinct_devices=key not in repeated,
                                 tail=tail)
    for ts, ts_rows in telemetry.items():
        await ts.write_group(conn, ts_rows)
    for item, batch, copy in alone:
        await item.target.apply_encoded(conn, item.device_id, batch, copy)
        item.conflicts.extend(item.target.conflicts)


def _encode(item: WriteItem, ts: TsTarget | None
            ) -> tuple[RowBatch | TelemetryBatch, bytes | TsRows] | None:
    """The item's batch (without the rows set apart) and its encoding; None when
    nothing of it is left to write."""
    batch = item.batch
    keep: list[int] | None = None  # rows of ``batch`` → rows of ``item.batch``
    if item.refused:
        gone = {f.index for f in item.refused}
        keep = [i for i in range(batch.row_count) if i not in gone]
        if not keep:
            return None
        batch = item.batch.select(keep)
    while True:
        try:
            if ts is not None:
                assert isinstance(batch, TelemetryBatch)
                return batch, ts.encode(item.device_id, batch)
            assert isinstance(batch, RowBatch)
            return batch, item.target.encode(item.device_id, batch)
        except BatchRejected as exc:
            # The slow path: only once a value did not fit.
            if keep is None:
                keep = list(range(batch.row_count))
            found = _ROW_FIELD.match(exc.field or "")
            if found is None or int(found.group(1)) >= len(keep):
                item.error = str(exc)
                return None
            at = int(found.group(1))
            item._refuse(RowFailure(keep[at], exc.code, exc.detail, exc.field))
            del keep[at]
            if not keep:
                return None
            batch = item.batch.select(keep)


async def write_rows_apart(conn: Conn, item: WriteItem) -> None:
    """Write one batch PostgreSQL refused (``ROW_ERRORS``), leaving out only the rows it
    refuses: the rows are tried in savepoints, in halves down to the one row, which is
    added to ``item.refused`` with the SQLSTATE and message. A ``LINEAGE_ERRORS`` error
    (or any other) raises: the batch cannot be written apart. The slow path only."""

    async def attempt(rows: list[int]) -> None:
        part = WriteItem(item.device_id, item.batch.select(rows), item.target)
        used: set[str] = set()
        async with conn.transaction():  # a savepoint: a refused part leaves no trace
            await write_batches(conn, [part], used)
            # Shared staging tables keep their rows until the commit: empty them, so
            # the next part does not write these again.
            for staging in used:
                await conn.execute(f"DELETE FROM {staging}")
        if part.error is not None:
            # An encoder error naming no row: it concerns every row, so the first part
            # (all of them) meets it, before anything was written.
            if len(rows) != len(todo):
                raise RuntimeError(f"encoding a part of a batch failed: {part.error}")
            item.error = part.error
            return
        for f in part.refused:
            item._refuse(RowFailure(rows[f.index], f.code, f.message, f.field))
        item.conflicts.extend(part.conflicts)

    async def one(row: int, exc: Exception) -> None:
        code = str(getattr(exc, "sqlstate", None) or type(exc).__name__)
        column = getattr(exc, "column_name", None) or None
        item._refuse(RowFailure(row, code, f"{type(exc).__name__}: {exc}", column))

    todo = [i for i in range(item.batch.row_count) if i not in {f.index for f in item.refused}]
    if todo:
        await split_on(ROW_ERRORS, todo, attempt, one)


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
