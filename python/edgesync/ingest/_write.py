"""The one write path: what happens to claimed batches after their claim.

Live ingest (``_accept``, under the group writer ``_group``) and replay (``_replay``)
both hand their decoded batches, each with its ledger row and its lineage's target, to
``write_claimed``, and both isolate a batch PostgreSQL refuses with ``isolate``:

1. the batches are written with one COPY per target table and layout (``write_batches``:
   a row whose value does not fit is set apart before anything is written);
2. a batch refused before for its data (``rows_apart``) has its rows written apart, in
   savepoints, down to the rows PostgreSQL refuses;
3. rows set apart are quarantined, counted on the batch's ledger row, and announced
   (``rows_quarantined``);
4. keys whose device change lost to a newer cloud write are sent back to the device;
5. a batch that cannot be written (``write_error``: refused as a whole, or an encoder
   error naming no row) is counted by the circuit breaker; its caller keeps it staged
   ``materialization_failed``.

``isolate`` is the split: an attempt at the batches that fails is tried again in halves
down to the one batch, which is then attempted again as its error says — a row's data
(``ROW_ERRORS``): its rows apart; the target's (``WRITE_ERRORS``): not written, counted;
a collision or an error nobody expected: as the caller decides (live ingest tries again
alone, replay gives the chunk back to its loop).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from edgesync._core import RowBatch, TelemetryBatch
from edgesync.control import record_materialization_failure, resend_cloud_rows
from edgesync.governance import EventType, Lineage, emit
from edgesync.ingest._ledger import UNSTORABLE_TEXT_ERRORS, note_quarantined
from edgesync.materialize import (
    ROW_ERRORS,
    WRITE_ERRORS,
    StateTarget,
    WriteItem,
    split_on,
    write_batches,
    write_rows_apart,
)
from edgesync.quarantine import quarantine_refused
from edgesync.store import CommitTail, Conn, collided

__all__ = ["Claimed", "Written", "isolate", "write_claimed"]

_log = logging.getLogger("edgesync.ingest")


class Attempted(Protocol):
    """A batch as ``isolate`` sees it: what its earlier attempts found."""

    rows_apart: bool
    write_error: str | None

    @property
    def device_name(self) -> str: ...


A = TypeVar("A", bound=Attempted)


@dataclass(slots=True, eq=False)
class Claimed:
    """A decoded batch with its ledger row, for its lineage's approved target."""

    device_id: uuid.UUID
    device_name: str
    lineage: Lineage
    # Its ledger row (edge_export_segments.id); None for a staged batch whose ledger row
    # is gone.
    segment_id: int | None
    batch: RowBatch | TelemetryBatch
    target: StateTarget
    # Set when PostgreSQL refused this batch's data before (alone): its rows are written
    # apart (savepoints) and the refused ones quarantined.
    rows_apart: bool = False
    # Set when writing this batch failed before (alone), or once it did: not written.
    write_error: str | None = None


@dataclass(frozen=True, slots=True)
class Written:
    """What happened to one batch: written (``rows`` of it, ``quarantined`` set apart),
    or not (``error``: its caller keeps it staged ``materialization_failed``)."""

    rows: int = 0
    quarantined: int = 0
    error: str | None = None
    # The ingest outcome's detail: how many rows were quarantined, if any.
    detail: str | None = None


async def write_claimed(conn: Conn, batches: list[Claimed], tail: CommitTail | None = None,
                        *, replay: bool = False) -> list[Written]:
    """Write ``batches`` in the caller's transaction and do what follows (quarantine,
    conflicts, failure counting); returns what happened to each, in order. A PostgreSQL
    error raises (the caller splits: ``isolate``). ``tail``: the state upserts run with
    the COMMIT (``store.committing``). ``replay``: marks the quarantine events."""
    items: list[tuple[int, WriteItem]] = []
    apart: list[tuple[int, WriteItem]] = []
    for i, c in enumerate(batches):
        if c.write_error is None:
            (apart if c.rows_apart else items).append(
                (i, WriteItem(c.device_id, c.batch, c.target)))
    if items:
        await write_batches(conn, [item for _, item in items], tail=tail)
    if apart and tail is not None:
        await tail.flush(conn)  # the rows-apart savepoints reuse the staging tables
    for i, item in apart:  # the slow path, after a failure
        await write_rows_apart(conn, item)
        items.append((i, item))
    out: dict[int, Written] = {}
    for i, item in items:
        c = batches[i]
        if item.error is not None:  # a value that does not fit, naming no row
            c.write_error = item.error
            continue
        if item.conflicts:
            await resend_cloud_rows(conn, c.lineage.id, c.device_id, item.conflicts)
        written = c.batch.row_count - len(item.refused)
        if item.refused:
            n = await _quarantine(conn, c, item, written, replay)
            out[i] = Written(written, n, detail=f"{n} row(s) quarantined")
        else:
            out[i] = Written(written)
    for i, c in enumerate(batches):
        if i not in out:
            assert c.write_error is not None
            await record_materialization_failure(conn, c.lineage.id, c.write_error)
            _log.warning("batch %s of %s not written%s: %s", c.batch.batch_id,
                         c.device_name, " by replay" if replay else " (staged)",
                         c.write_error)
            out[i] = Written(error=c.write_error)
    return [out[i] for i in range(len(batches))]


async def _quarantine(conn: Conn, c: Claimed, item: WriteItem, written: int,
                      replay: bool) -> int:
    lineage = c.lineage
    n = await quarantine_refused(conn, project_id=lineage.project_id, lineage_id=lineage.id,
                                 segment_id=c.segment_id, item=item)
    if c.segment_id is not None:
        await note_quarantined(conn, [(c.segment_id, n)])
    first = item.refused[0]
    data = {"lineage_id": str(lineage.id), "batch_id": c.batch.batch_id, "rows": n,
            "reason_code": first.code, "reason": first.message[:300]}
    if replay:
        data["replay"] = True
    await emit(conn, lineage.project_id, EventType.ROWS_QUARANTINED, lineage.id, data)
    _log.warning("batch %s of %s: %d row(s) quarantined (%s: %s), %d written",
                 c.batch.batch_id, c.device_name, n, first.code, first.message[:200], written)
    return n


async def isolate(batches: list[A], attempt: Callable[[list[A]], Awaitable[None]], *,
                  retry: Callable[[A, Exception], Awaitable[bool]],
                  unstorable: Callable[[A, Exception], Awaitable[None]]) -> None:
    """``attempt(batches)``; when it raises, the halves again (``split_on``) down to the
    one batch, which is attempted again as its error says: PostgreSQL refusing its data
    (``ROW_ERRORS``) the first time, with ``rows_apart`` set; refusing it otherwise
    (``WRITE_ERRORS``), or its rows apart, with ``write_error`` set (not written,
    counted). A collision (``store.collided``, checked first: one in the catalogs is a
    unique violation, which would pass for the data's) or an error nobody expected goes
    to ``retry``, which raises, or returns whether to attempt the batch again (having
    changed it or waited). A batch whose text PostgreSQL cannot store even unwritten
    goes to ``unstorable``."""
    await _Isolation(attempt, retry, unstorable).run(batches)


class _Isolation(Generic[A]):
    """``isolate``'s recursion as bound methods, not a closure: a nested function that
    names itself is a reference cycle, which kept each call's ``attempt`` — and through
    it a replay chunk's decoded batches — alive until the cyclic collector ran (a soak's
    replay of 15,000 staged batches held ~2,500 of them, +100 MB of RSS)."""

    __slots__ = ("_attempt", "_retry", "_unstorable")

    def __init__(self, attempt: Callable[[list[A]], Awaitable[None]],
                 retry: Callable[[A, Exception], Awaitable[bool]],
                 unstorable: Callable[[A, Exception], Awaitable[None]]) -> None:
        self._attempt, self._retry, self._unstorable = attempt, retry, unstorable

    async def run(self, batches: list[A]) -> None:
        await split_on((Exception,), batches, self._attempt, self._alone)

    async def _alone(self, one: A, exc: Exception) -> None:
        if collided(exc):
            if await self._retry(one, exc):
                await self.run([one])
            return
        if isinstance(exc, ROW_ERRORS) and not one.rows_apart and one.write_error is None:
            _log.warning("writing a batch from %s failed, writing its rows apart: %s",
                         one.device_name, exc)
            one.rows_apart = True
        elif isinstance(exc, WRITE_ERRORS) and one.write_error is None:
            _log.warning("writing a batch from %s failed, not writing it: %s",
                         one.device_name, exc)
            one.write_error = str(exc)
        elif isinstance(exc, UNSTORABLE_TEXT_ERRORS):
            await self._unstorable(one, exc)
            return
        elif not await self._retry(one, exc):
            return
        await self.run([one])
