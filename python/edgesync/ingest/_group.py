"""Group commit: batch messages handled concurrently share transactions.

Every caller of ``GroupWriter.submit`` queues its message and waits for the outcome,
which comes only once the transaction holding the message's effect has committed — so
a consumer that acknowledges after ``submit`` returns acknowledges after commit. Up to
``lanes`` callers at a time lead: a leader takes up to ``max_group`` queued messages
(its own among them, sooner or later) and writes them in one transaction; the others
wait for their outcome or for a free lane. No background task: the writer needs no
start or stop, and a cancelled leader puts what it took back at the head of the queue.
A leader takes no batch of a device the other lane is writing (``_take``), so the lanes'
transactions never wait on each other's lineage locks.

A group, in order:

1. its batches are decoded and validated (Rust); rejections are recorded;
2. one transaction accepts the decoded batches (``_accept``): a redelivery of an
   accepted batch finds its ledger row there, writes nothing and has its confirmation
   queued again. (Looking redeliveries up first, outside the transaction, cost every
   group a round trip — 4% of a small group's time at half load — to spare the rare
   redelivery a decoding.)

A PostgreSQL error of the data (``WRITE_ERRORS``) splits the group in two and tries each
half, down to the one batch (``_write.isolate``, the split replay shares). When the
error was a row's (``ROW_ERRORS``), that batch is accepted again with its rows written
apart, halved down to the rows PostgreSQL refuses, which are quarantined; when it was
the target's (``LINEAGE_ERRORS``: dropped, altered, no permission) — or the rows cannot
be written apart — the batch is staged ``materialization_failed``. A lost connection
(``TRANSIENT_ERRORS``) retries the same group with backoff, for as long as it takes: the
messages stay unacknowledged meanwhile, so the consumer's in-flight window fills and it
stops taking more. Transactions colliding (``store.collided``: a deadlock, a
serialization failure, a lock timeout, an object another transaction created first)
retry the same group a few times, then split it. Any other error splits the group too. A
batch alone that collides or fails unexpectedly is tried again alone with backoff; one
that fails the same way every time is staged ``materialization_failed`` (a ledger row,
counted by the breaker), and one that cannot even be staged is recorded rejected
``ingest_failed``. No batch is acknowledged without a ledger row for an error a retry
could clear.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import asyncpg

from edgesync import _core
from edgesync.errors import BatchRejected
from edgesync.fleet import DeviceScope
from edgesync.governance import forget_targets
from edgesync.ingest._accept import Work, accept_group
from edgesync.ingest._ledger import (
    UNSTORABLE_TEXT,
    SegmentKey,
    record_rejection,
)
from edgesync.ingest._outcome import IngestOutcome, OutcomeStatus
from edgesync.ingest._trace import BatchStamps, current_stamps
from edgesync.ingest._write import isolate
from edgesync.materialize import WRITE_ERRORS
from edgesync.protocol import Backoff, RejectionCode, TopicKind
from edgesync.store import TRANSIENT_ERRORS, Conn, collided, committing

__all__ = ["GroupWriter"]

_log = logging.getLogger("edgesync.ingest")

# Staging tables created with a group's BEGIN (``GroupWriter._prelude``).
_PRELUDE_MAX = 4
# Attempts at a group whose transactions collide before it is split; attempts at a batch
# alone failing the same way (a collision, an unexpected error) before it is staged
# materialization_failed, and again before staged fails too and it is recorded rejected.
_COLLISION_ATTEMPTS = 4
_ALONE_ATTEMPTS = 5


@dataclass(slots=True, eq=False)
class _Entry:
    scope: DeviceScope
    kind: TopicKind
    payload: bytes
    max_payload_bytes: int | None
    future: asyncio.Future[IngestOutcome]
    write_error: str | None = None
    rows_apart: bool = False
    # Taken from the queue by a leader (which resolves it, or puts it back).
    taken: bool = False
    work: Work | None = field(default=None, repr=False)
    # Failed alone in a way a retry may clear: how often in a row, with which error.
    failures: int = 0
    failed_with: type[BaseException] | None = None
    backoff: Backoff | None = field(default=None, repr=False)
    # What its caller waits on: the outcome, or a lane to lead (``nudge``).
    wake: asyncio.Future[None] | None = field(default=None, repr=False)
    # Its timings, when batches are traced (``serve --trace-batches``).
    stamps: BatchStamps | None = field(default=None, repr=False)

    @property
    def device_name(self) -> str:
        return self.scope.device_name

    def resolve(self, outcome: IngestOutcome) -> None:
        if not self.future.done():
            self.future.set_result(outcome)
            self.nudge()

    def fail(self, exc: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(exc)
            self.nudge()

    def nudge(self) -> None:
        if self.wake is not None and not self.wake.done():
            self.wake.set_result(None)


class GroupWriter:
    """Writes batch messages of any devices and lineages in shared transactions."""

    # 128 = the consumers' default window (256) shared by the two lanes: a window no
    # larger than one group leaves one lane idle while the other writes (measured
    # in-process at 1,000 devices, commit eadc433: groups of 256 gave a third fewer
    # batches per second).
    def __init__(self, pool: asyncpg.Pool, *, max_group: int = 128, lanes: int = 2,
                 linger: float = 0.002) -> None:
        self._pool = pool
        self._max_group = max_group
        self._lanes = lanes
        # Waiting for a group to fill is worth it only when groups are already being
        # written (load); alone, a message is written at once.
        self._linger = linger
        # The staging tables' CREATE … IF NOT EXISTS that the last groups needed: sent
        # with the next BEGIN, they cost no round trip (a fleet's tables mostly share
        # a few layouts; more than a few are created apart, as they come).
        self._prelude: list[str] = []
        self._pending: collections.deque[_Entry] = collections.deque()
        self._leaders = 0
        # Devices with batches in a group being written, and who waits for one to end.
        self._writing: collections.Counter[uuid.UUID] = collections.Counter()
        self._written: list[asyncio.Future[None]] = []
        # Sizes of the groups written, for metrics and tests.
        self.group_sizes: collections.Counter[int] = collections.Counter()
        # Metrics hook (edgesync.observe): called with (size, seconds) per group written.
        self.on_group: Callable[[int, float], None] | None = None
        # Freshness/presence hook (edgesync.observe.Presence): called, in memory, with
        # the works of each committed group transaction.
        self.on_committed: Callable[[list[Work]], None] | None = None
        # Traffic hook (presence and metrics): (device_id, bytes as received, bytes as
        # JSON) once per message, the JSON of a compressed batch when it is inflated.
        self.on_received: Callable[[uuid.UUID, int, int], None] | None = None

    @property
    def queued(self) -> int:
        return len(self._pending)

    async def submit(self, scope: DeviceScope, kind: TopicKind, payload: bytes, *,
                     max_payload_bytes: int | None = None) -> IngestOutcome:
        """Accept one ``sync/rows/batch`` or ``sync/telemetry/batch`` message; returns
        once its outcome is committed."""
        loop = asyncio.get_running_loop()
        if self.on_received is not None:
            framed = payload.startswith(_core.ZSTD_MAGIC)
            self.on_received(scope.device_id, len(payload), 0 if framed else len(payload))
        entry = _Entry(scope, kind, payload, max_payload_bytes, loop.create_future())
        if (stamps := current_stamps()) is not None:
            stamps.submitted = time.monotonic()
            entry.stamps = stamps
        self._pending.append(entry)
        try:
            while not entry.future.done():
                if not entry.taken and self._leaders < self._lanes:
                    self._leaders += 1
                    try:
                        await self._lead(entry)
                    finally:
                        self._leaders -= 1
                        self._free_lane()
                else:
                    # Woken by its outcome, or by a freed lane when it heads the queue:
                    # one caller per lane freed, not every waiting one.
                    entry.wake = loop.create_future()
                    await entry.wake
                    entry.wake = None
                    if entry.taken and not entry.future.done():
                        self._free_lane()  # taken meanwhile: the nudge goes on to the next
        except BaseException:
            if entry.taken:
                # In a group being written: done (cancelled) now, so that its leader, if
                # stopped too, does not put it back. Queued with nobody waiting on it,
                # it would take every nudge of a freed lane and nobody would lead.
                entry.future.cancel()
            else:  # nobody writes it now
                self._pending.remove(entry)
                self._free_lane()  # it may have been woken to lead: the next one leads
            raise
        return entry.future.result()

    def _free_lane(self) -> None:
        """A lane is free: the oldest queued caller leads next."""
        if self._pending and self._leaders < self._lanes:
            self._pending[0].nudge()

    async def _lead(self, own: _Entry) -> None:
        while not own.taken:
            if self._leaders > 1 and len(self._pending) < self._max_group:
                await asyncio.sleep(self._linger)
                if own.taken:  # by the other leader, meanwhile
                    return
            group = self._take()
            if not group:  # every queued batch is of a device the other lane writes
                await self._a_group_written()
                continue
            started = time.perf_counter()  # metrics hook (edgesync.observe)
            try:
                await self._write(group)
            except BaseException:
                # Stopped mid-group: the transaction rolled back; another caller
                # leads the unresolved entries again.
                back = [e for e in group if not e.future.done()]
                for e in back:
                    e.taken = False
                self._pending.extendleft(reversed(back))
                self._free_lane()
                raise
            finally:
                self._release(group)
            self.group_sizes[len(group)] += 1
            if self.on_group is not None:  # metrics hook (edgesync.observe)
                self.on_group(len(group), time.perf_counter() - started)

    def _take(self) -> list[_Entry]:
        """Up to ``max_group`` queued batches, oldest first, of devices no other lane is
        writing. The lanes' groups then lock disjoint lineages: a group sharing a
        lineage with the other lane's would wait for that group's commit holding its
        own locks, and two lanes would take turns instead of writing side by side (at
        100 to 1,000 devices every pair of 128-batch groups shares some lineages). A
        device's skipped batches keep their place for the next group."""
        group: list[_Entry] = []
        skipped: list[_Entry] = []
        while self._pending and len(group) < self._max_group:
            e = self._pending.popleft()
            (skipped if self._writing[e.scope.device_id] else group).append(e)
        self._pending.extendleft(reversed(skipped))
        now = time.monotonic()
        for e in group:
            e.taken = True
            if e.stamps is not None:
                e.stamps.grouped, e.stamps.group = now, len(group)
        for e in group:  # after the loop: a device's batches may be several in one group
            self._writing[e.scope.device_id] += 1
        return group

    def _release(self, group: list[_Entry]) -> None:
        for e in group:
            self._writing[e.scope.device_id] -= 1
            if not self._writing[e.scope.device_id]:
                del self._writing[e.scope.device_id]
        waiting, self._written = self._written, []
        for w in waiting:
            if not w.done():
                w.set_result(None)

    async def _a_group_written(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._written.append(waiter)
        await waiter

    async def _write(self, group: list[_Entry]) -> None:
        await isolate(group, self._retrying, retry=self._again_alone,
                      unstorable=self._unstorable)

    async def _retrying(self, group: list[_Entry]) -> None:
        """One attempt at the group, repeated for as long as the database is away, and a
        few times when its transaction collides with another."""
        backoff = Backoff(base=0.1, cap=5.0)
        refreshed = False
        collisions = 0
        while True:
            try:
                async with self._pool.acquire() as conn:
                    try:
                        await self._attempt(conn, group)
                    except asyncpg.InterfaceError as exc:
                        # A connection lost mid-transaction: leaving the transaction
                        # block raises "the underlying connection is closed" in place of
                        # the lost connection's own error. Not the data's: retried (as a
                        # split it would fail, and acknowledge, single batches).
                        if _closed(conn):
                            raise ConnectionError(f"connection lost mid-group: {exc}") from exc
                        raise
                return
            except Exception as exc:
                # Checked first: a collision in the catalogs is a unique violation,
                # which would otherwise pass for the data's (``ROW_ERRORS``).
                if collided(exc):
                    collisions += 1
                    if collisions >= _COLLISION_ATTEMPTS:
                        raise  # split: the batch alone is tried again (``_alone``)
                elif isinstance(exc, WRITE_ERRORS):
                    # A column type altered by hand makes cached targets stale: once, the
                    # same group again with every target read from the catalog, before
                    # the error is taken to be the data's (and the group split).
                    if forget_targets() and not refreshed:
                        refreshed = True
                        continue
                    raise
                elif not isinstance(exc, TRANSIENT_ERRORS):
                    raise
                wait = backoff.next_delay()
                _log.warning("writing a group of %d batch(es) failed (%s: %s); retrying in "
                             "%.1fs", len(group), type(exc).__name__, exc, wait)
                await asyncio.sleep(wait)

    async def _unstorable(self, entry: _Entry, exc: Exception) -> None:
        # Even staged it cannot be stored: recorded as a rejection, never dropped.
        rej = BatchRejected(UNSTORABLE_TEXT, f"PostgreSQL text cannot hold a string of "
                            f"this batch ({type(exc).__name__}: {exc})")
        await self._reject(entry, rej)
        _log.warning("rejected %s from %s: %s", entry.kind.value, entry.scope.device_name, rej)

    async def _again_alone(self, entry: _Entry, exc: Exception) -> bool:
        """The batch alone failed in a way a retry may clear: a collision with another
        transaction, or an error nobody expected. Again after a pause while it fails
        otherwise or fewer than ``_ALONE_ATTEMPTS`` times the same way; then staged
        ``materialization_failed``; when that fails the same way too, recorded rejected
        ``ingest_failed``. Each is a ledger row, and counted: never a batch
        acknowledged with nothing to show for it. Returns whether to attempt it again."""
        kind = type(exc)
        entry.failures = entry.failures + 1 if entry.failed_with is kind else 1
        entry.failed_with = kind
        if entry.failures < _ALONE_ATTEMPTS:
            if entry.backoff is None:
                entry.backoff = Backoff(base=0.1, cap=2.0)
            wait = entry.backoff.next_delay()
            _log.warning("writing a batch from %s failed (%s: %s); trying it alone again "
                         "in %.1fs", entry.scope.device_name, kind.__name__, exc, wait)
            await asyncio.sleep(wait)
            return True
        if entry.write_error is None:
            _log.error("writing a batch from %s failed %d times alone, staging it "
                       "materialization_failed", entry.scope.device_name, entry.failures,
                       exc_info=exc)
            entry.write_error = f"{kind.__name__}: {exc}"
            entry.failures, entry.failed_with, entry.backoff = 0, None, None
            return True
        rej = BatchRejected(RejectionCode.INGEST_FAILED, "the worker could neither write nor "
                            f"stage this batch ({kind.__name__}: {exc})")
        _log.error("ingest of a batch from %s failed %d times alone, staged too: recorded "
                   "rejected %s", entry.scope.device_name, entry.failures, rej.code,
                   exc_info=exc)
        try:
            await self._reject(entry, rej)
        except Exception as again:  # the database refuses even that: the consumer logs it
            entry.fail(again)
        return False

    async def _reject(self, entry: _Entry, rej: BatchRejected) -> None:
        async with self._pool.acquire() as conn:
            lineage_id = await record_rejection(conn, entry.scope.device_id, entry.kind.value,
                                                entry.payload, rej)
        entry.resolve(IngestOutcome(OutcomeStatus.REJECTED, RejectionCode(rej.code), rej.detail,
                                    lineage_id))

    async def _attempt(self, conn: Conn, group: list[_Entry]) -> None:
        todo = [e for e in group if not e.future.done()]
        works: list[Work] = []
        firsts: dict[SegmentKey, _Entry] = {}
        for e in todo:
            try:
                if e.payload.startswith(_core.ZSTD_MAGIC):
                    # A compressed batch: from here on (ledger, staging) its JSON, as if
                    # it had come plain; the limits bound the inflating itself.
                    e.payload = _core.inflate_batch(e.payload, e.max_payload_bytes)
                    if self.on_received is not None:
                        self.on_received(e.scope.device_id, 0, len(e.payload))
                batch = _decoder(e.kind, e.max_payload_bytes)(e.payload)
            except BatchRejected as rej:
                lineage_id = await record_rejection(conn, e.scope.device_id, e.kind.value,
                                                    e.payload, rej)
                _log.info("rejected %s from %s: %s", e.kind.value, e.scope.device_name, rej)
                e.resolve(IngestOutcome(OutcomeStatus.REJECTED, RejectionCode(rej.code), rej.detail,
                                        lineage_id))
                continue
            e.work = Work(e.scope, e.kind, e.payload, batch, e.write_error, e.rows_apart)
            first = firsts.setdefault(e.work.key, e)
            if first is not e:  # the same batch twice in one group
                continue
            works.append(e.work)
        if works:
            if any(w.rows_apart for w in works):
                # The slow path writes rows in savepoints: asyncpg's own transaction.
                async with conn.transaction():
                    await accept_group(conn, works)
                    _stamp(todo, "written")
            else:
                # The upserts and the settle travel with the COMMIT: one round trip.
                async with committing(conn, self._prelude) as tail:
                    await accept_group(conn, works, tail)
                    _stamp(todo, "written")
                self._prelude = list(dict.fromkeys(
                    tail.ensured + self._prelude))[:_PRELUDE_MAX]
            _stamp(todo, "committed")
            if self.on_committed is not None:
                self.on_committed(works)
        for e in todo:
            if e.work is None or e.future.done():
                continue
            first = firsts[e.work.key]
            if first is e:
                assert e.work.outcome is not None
                e.resolve(e.work.outcome)
            else:
                e.resolve(IngestOutcome(OutcomeStatus.DUPLICATE, None, e.work.batch.batch_id))


def _closed(conn: Conn) -> bool:
    try:
        return conn.is_closed()
    except asyncpg.InterfaceError:  # the pool let go of it already: closed
        return True


def _decoder(kind: TopicKind, max_payload_bytes: int | None
             ) -> Callable[[bytes], _core.RowBatch | _core.TelemetryBatch]:
    if kind is TopicKind.TELEMETRY_BATCH:
        return _core.decode_telemetry_batch
    return lambda p: _core.decode_row_batch(p, max_payload_bytes)


def _stamp(entries: list[_Entry], step: str) -> None:
    """Traced batches (``serve --trace-batches``): the time ``step`` was reached."""
    now = time.monotonic()
    for e in entries:
        if e.stamps is not None and e.work is not None:
            setattr(e.stamps, step, now)
            e.stamps.batch_id = e.work.batch.batch_id
