"""``Agent``: capture application changes and publish them; obey downlink controls.

    async with Agent(config) as agent:   # open DBs, install triggers, start MQTT link
        await agent.run()                 # flush every flush_interval, forever

The agent is an async shell: its lifecycle (one ``AgentLifecycle`` state, ``_lifecycle``),
the MQTT link, the flush order and the upload PUTs. The device's databases and every
store over them are one ``DeviceDatabase`` (``_device_db``), built whole when the agent
is entered. All SQLite work happens on one dedicated thread
(the connections are used nowhere else), so a busy application database never blocks
the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import http.client
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from types import TracebackType
from typing import Concatenate, NoReturn, ParamSpec, Self, TypeVar

import orjson

from edgesync.agent._device_db import DeviceDatabase
from edgesync.agent._lifecycle import AgentLifecycle, misuse, require
from edgesync.agent._lock import InstanceLock
from edgesync.agent.capture._freshness import SeenMarks
from edgesync.agent.capture._source import check_source
from edgesync.agent.config import AgentConfig
from edgesync.agent.jobs._http_put import put_file
from edgesync.agent.jobs._uploads import UploadStatus, UploadStep
from edgesync.agent.link._inbox import Accepted
from edgesync.agent.link._publisher import MqttLink
from edgesync.agent.link._status import will_payload
from edgesync.agent.link._wire import Wire, WireBudget
from edgesync.errors import ConfigError, OversizedRowError
from edgesync.protocol import AgentState, TopicKind, periodic_loop, topic_for

__all__ = ["Agent"]

log = logging.getLogger("edgesync.agent")

P = ParamSpec("P")
T = TypeVar("T")


class Agent:
    def __init__(self, config: AgentConfig, *,
                 budget: Callable[[tuple[str, int]], WireBudget] | None = None) -> None:
        """``budget`` builds the bandwidth budget from ``(day, bytes)`` last counted in
        ``state.db`` (tests pass one with their clocks); by default the configuration's."""
        sec = config.security
        if sec.signed_control and not sec.auth_token:
            raise ConfigError("security.auth_token_env",
                              "required when security.signed_control.enabled is true "
                              "(its token is the control signing key)")
        self._config = config
        self._signing_key = (sec.auth_token.encode() if sec.signed_control and sec.auth_token
                             else None)
        root = config.connection.root_topic
        self._topics = {k: topic_for(root, k) for k in TopicKind}
        self._link = MqttLink(config.connection, self._on_control,
                              will=(self._topics[TopicKind.INGEST_REQUEST], will_payload()))
        self._budget = budget
        self._wire: Wire | None = None  # set while open: its budget reads state.db
        self._budgets = (0, 0)  # the configuration's budgets the wire follows
        self._waited_on = ""  # the UTC day the daily budget last stopped data
        # The database thread; it starts at the first call (none before __aenter__).
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="edgesync-agent-db")
        self._lifecycle = AgentLifecycle.NEW
        self._device: DeviceDatabase | None = None  # set while OPEN, RUNNING, STOPPING
        self._run_task: asyncio.Task[object] | None = None  # set while RUNNING
        # When each journaled change was first seen (first_seen_at_ms), see _freshness.
        self._marks = SeenMarks()
        self._flush_lock = asyncio.Lock()
        self._stack = contextlib.AsyncExitStack()
        rep = config.replication
        self._lock = InstanceLock(rep.source_db_path, rep.state_db_path)

    @property
    def lifecycle(self) -> AgentLifecycle:
        return self._lifecycle

    @property
    def config(self) -> AgentConfig:
        """The configuration in force: the YAML's, or (once open) the sync policy it
        opted into (``remote_policy``)."""
        return self._device.config if self._device is not None else self._config

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Self:
        require(self._lifecycle, "async with Agent(config)", AgentLifecycle.NEW)
        self._lifecycle = AgentLifecycle.OPENING
        opening: Future[DeviceDatabase] | None = None
        try:
            # The source's own mistakes first: no lock file beside a missing database.
            check_source(self._config.replication.source_db_path)
            self._lock.acquire()  # before anything is opened: a second agent changes nothing
            opening = self._executor.submit(DeviceDatabase, self._config,
                                            signing_key=self._signing_key, marks=self._marks)
            self._device = device = await asyncio.wrap_future(opening)
            spent = await asyncio.wrap_future(self._executor.submit(device.state.bytes_spent))
            self._wire = Wire(self._link, self._make_budget(spent),
                              device.config.replication.compression, self._count_sent)
            conn = device.config.connection
            self._budgets = (conn.max_bytes_per_second, conn.max_bytes_per_day)
            tasks = await self._stack.enter_async_context(asyncio.TaskGroup())
            link = tasks.create_task(self._link.run(), name="edgesync-agent-mqtt")
            self._stack.callback(link.cancel)  # runs first: the task group then ends
        except BaseException:
            await self._close(opening)
            raise
        self._lifecycle = AgentLifecycle.OPEN
        return self

    def _make_budget(self, spent: tuple[str, int]) -> WireBudget:
        if self._budget is not None:
            return self._budget(spent)
        assert self._device is not None
        conn = self._device.config.connection  # the YAML's, or the policy's it opted into
        return WireBudget(conn.max_bytes_per_second, conn.max_bytes_per_day, spent=spent)

    async def _count_sent(self, day: str, size: int) -> None:
        await self._db(DeviceDatabase.bytes_sent, day, size)

    def _on_wire(self) -> Wire:
        wire = self._wire
        if wire is None:
            raise misuse(self._lifecycle, "Agent")
        return wire

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        run_task, self._run_task = self._run_task, None
        self._lifecycle = AgentLifecycle.STOPPING
        if run_task is not None and run_task is not asyncio.current_task():
            run_task.cancel()  # a run() left going in another task stops with the agent
        await self._goodbye()
        try:
            await self._stack.__aexit__(exc_type, exc, tb)
        finally:
            await self._close()

    async def _goodbye(self) -> None:
        """The last status report (``stopped``), when the broker is there to take it;
        then the bytes counted since the last flush are written."""
        wire = self._wire
        if wire is None:
            return
        try:
            if self.connected:
                payload = await self._db(DeviceDatabase.status_report, connected=True,
                                         state=AgentState.STOPPED, usage=self._usage())
                await asyncio.wait_for(
                    wire.send(self._topics[TopicKind.INGEST_REQUEST], payload), 5.0)
        except Exception as exc:  # stopping anyway (a timeout included)
            log.debug("final status report not sent: %s", exc)
        with contextlib.suppress(Exception):
            await wire.save()

    async def _close(self, opening: Future[DeviceDatabase] | None = None) -> None:
        device, self._device = self._device, None
        loop = asyncio.get_running_loop()
        with contextlib.suppress(Exception):
            if device is not None:
                await loop.run_in_executor(self._executor, device.close)
            elif opening is not None:  # entering was cancelled while the thread built it
                await loop.run_in_executor(self._executor, _close_built, opening)
        self._executor.shutdown(wait=True)
        self._lock.release()
        self._lifecycle = AgentLifecycle.CLOSED

    async def _db(self, fn: Callable[Concatenate[DeviceDatabase, P], T],
                  *args: P.args, **kwargs: P.kwargs) -> T:
        """``fn(device, …)`` on the database thread, while the agent is open."""
        device = self._device
        if device is None:  # not open (yet, or any more): say so, and what to do
            raise misuse(self._lifecycle, "Agent")
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, functools.partial(fn, device, *args, **kwargs))

    # ------------------------------------------------------------------ public API

    @property
    def connected(self) -> bool:
        return self._link.connected.is_set()

    async def wait_connected(self) -> None:
        await self._link.connected.wait()

    async def run(self) -> NoReturn:
        """Flush every ``flush_interval`` until cancelled; a failed flush (broker trouble,
        a busy or failing database) is logged and retried with backoff (pending batches
        keep their ``batch_id``). One ``run()`` at a time, inside ``async with``; leaving
        the block stops it."""
        require(self._lifecycle, "Agent.run()", AgentLifecycle.OPEN)
        self._lifecycle = AgentLifecycle.RUNNING
        self._run_task = asyncio.current_task()
        try:
            await periodic_loop("agent flush", self.flush,
                                interval=self.config.replication.flush_interval_s, logger=log)
        finally:
            if self._lifecycle is AgentLifecycle.RUNNING:  # not stopping: open, as before
                self._lifecycle = AgentLifecycle.OPEN
                self._run_task = None

    async def flush(self) -> int:
        """Publish everything captured so far; returns how many rows were sent.

        Waits for the broker connection. Order: controls left unfinished by a crash,
        schema observations, gap reports, row batches, telemetry batches, uploads, the
        status report when due (every 30 s, docs/protocol.md). Each batch is
        recorded before it is published and confirmed after its PUBACK; journal rows
        and telemetry batches stay until the cloud's progress control says they are
        committed.
        """
        require(self._lifecycle, "Agent.flush()", AgentLifecycle.OPEN, AgentLifecycle.RUNNING)
        async with self._flush_lock:
            wire = self._on_wire()
            self._follow_policy(wire)
            for accepted in await self._db(DeviceDatabase.unfinished_controls):
                await self._ack_and_execute(accepted)
            plan = await self._db(DeviceDatabase.prepare_flush)
            for table, doc, is_telemetry in plan.observes:
                await wire.send(self._topics[TopicKind.SCHEMA_OBSERVE], doc)
                await self._db(DeviceDatabase.observed, table,
                               orjson.loads(doc)["schema_hash"], is_telemetry)
            for gap_id, doc in plan.gaps:
                await wire.send(self._topics[TopicKind.INGEST_REQUEST], doc)
                await self._db(DeviceDatabase.gap_reported, gap_id,
                               orjson.loads(doc)["source_table"])
            sent = await self._flush_data(plan.upto, plan.rows_tables,
                                          await self._db(DeviceDatabase.telemetry_tables))
            for job_id, report in await self._db(DeviceDatabase.recovery_reports):
                await wire.send(self._topics[TopicKind.INGEST_REQUEST], report)
                await self._db(DeviceDatabase.recovery_sent, job_id, report)
            await self._flush_uploads()
            await self._report_if_due()  # last: data first
            await wire.save()
            return sent

    async def _report_if_due(self) -> None:
        """The status report, when one is due (also between batches: a paced backlog
        never holds it back by more than one batch)."""
        status = await self._db(DeviceDatabase.due_status_report, connected=self.connected,
                                usage=self._usage())
        if status is not None:
            await self._on_wire().send(self._topics[TopicKind.INGEST_REQUEST], status)

    def _follow_policy(self, wire: Wire) -> None:
        """A sync policy (``remote_policy``) may change the compression and the budget."""
        wire.compression = self.config.replication.compression
        conn = self.config.connection
        budgets = (conn.max_bytes_per_second, conn.max_bytes_per_day)
        if budgets != self._budgets:  # only on a change: a budget given to Agent() stays
            self._budgets = budgets
            wire.budget.per_second, wire.budget.per_day = budgets

    def _usage(self) -> dict[str, int | None]:
        """The status report's wire figures (bytes are the UTC day's)."""
        budget = self._on_wire().budget
        return {"bytes_sent": budget.spent_today, "budget_left_bytes": budget.left_today}

    async def _flush_data(self, upto: int, rows_tables: list[str],
                          telemetry_tables: list[str]) -> int:
        """Row and telemetry batches, one at a time, always from the table of the lowest
        ``priority`` that has one (ties in the plan's order: rows tables, then
        telemetry): after each batch of a table that a rows table outranks, the journal
        is read again, so a state change waits behind at most one lower batch. Stops
        while the UTC day's budget is spent (the rest waits for the next day)."""
        strategy = self.config.replication.strategy_for
        order = sorted([(t, False) for t in rows_tables] + [(t, True) for t in telemetry_tables],
                       key=lambda entry: strategy(entry[0]).rank)
        drained: set[str] = set()
        sent = 0
        while not self._on_wire().budget.data_waits():
            for table, is_telemetry in order:
                if table in drained:
                    continue
                rows = await (self._publish_telemetry(table) if is_telemetry
                              else self._publish_rows(table, upto))
                if rows is None:
                    drained.add(table)
                    continue
                sent += rows
                if self._on_wire().budget.per_second:
                    await self._report_if_due()
                rank = strategy(table).rank
                if any(strategy(t).rank < rank for t in rows_tables):
                    upto = await self._db(DeviceDatabase.poll_journal)
                    drained.difference_update(rows_tables)
                break
            else:
                return sent
        budget = self._on_wire().budget
        if self._waited_on != budget.day:  # once a day, not at every flush
            self._waited_on = budget.day
            log.warning("the day's bandwidth budget (%d bytes) is spent: data waits for the "
                        "next UTC day; controls and status reports still go", budget.per_day)
        return sent

    async def _flush_uploads(self) -> None:
        """Move every upload on: PUT granted objects (or ask again when a grant is no
        good), request URLs, finalize what was uploaded."""
        request = self._topics[TopicKind.INGEST_REQUEST]
        for up in await self._db(DeviceDatabase.uploads_in, UploadStatus.GRANTED):
            url = up.presigned_url
            if url is None or up.expired(datetime.now(UTC)):
                await self._db(DeviceDatabase.upload_step, UploadStep.REGRANT, up.upload_key,
                               "URL expired")
                continue
            path = await self._db(DeviceDatabase.build_upload, up)
            if path is None:
                continue
            try:
                result = await asyncio.to_thread(put_file, url, path)
            except (OSError, http.client.HTTPException, ValueError) as exc:
                log.warning("upload %s: PUT failed: %s; retrying at the next flush",
                            up.batch_id, exc)
                continue
            if result.status in (200, 201, 204, 409):  # 409: an earlier attempt got there
                await self._db(DeviceDatabase.upload_step, UploadStep.UPLOADED, up.upload_key)
            elif result.status in (403, 404):
                await self._db(DeviceDatabase.upload_step, UploadStep.REGRANT, up.upload_key,
                               f"PUT refused: {result!r}")
            else:
                log.error("upload %s: PUT answered %r; retrying at the next flush",
                          up.batch_id, result)
        for up in await self._db(DeviceDatabase.uploads_in, UploadStatus.WANTED):
            await self._on_wire().send(request, up.request())
            await self._db(DeviceDatabase.upload_step, UploadStep.REQUESTED, up.upload_key)
        for up in await self._db(DeviceDatabase.uploads_in, UploadStatus.UPLOADED):
            await self._on_wire().send(request, up.finalize())
            await self._db(DeviceDatabase.upload_step, UploadStep.FINALIZED, up.upload_key)

    async def _publish_rows(self, table: str, upto: int) -> int | None:
        """The table's next row batch published (its row count), or None: none left."""
        while True:
            try:
                batch = await self._db(DeviceDatabase.next_batch, table, upto)
            except OversizedRowError as exc:
                # it goes by upload; the table goes on
                await self._db(DeviceDatabase.spill, exc)
                continue
            if batch is None:
                return None
            await self._on_wire().send_batch(self._topics[TopicKind.ROWS_BATCH], batch.payload)
            await self._db(DeviceDatabase.confirm, batch)
            log.debug("published %d rows of %r (commit_seq %d..%d, batch %s)",
                      batch.row_count, table, batch.pending.first_commit_seq,
                      batch.pending.last_commit_seq, batch.pending.batch_id)
            return batch.row_count

    async def _publish_telemetry(self, table: str) -> int | None:
        """The table's next telemetry batch (an unpublished one first) published, or None."""
        batch = await self._db(DeviceDatabase.next_telemetry, table)
        if batch is None:
            return None
        await self._on_wire().send_batch(self._topics[TopicKind.TELEMETRY_BATCH], batch.payload)
        await self._db(DeviceDatabase.telemetry_published, batch)
        log.debug("published %d telemetry rows of %r (batch_seq %d)", batch.row_count,
                  batch.source_table, batch.batch_seq)
        return batch.row_count

    # ------------------------------------------------------------------ downlink

    async def _on_control(self, payload: bytes) -> None:
        accepted = await self._db(DeviceDatabase.accept, payload)
        if accepted is not None:
            await self._ack_and_execute(accepted)

    async def _ack_and_execute(self, accepted: Accepted) -> None:
        await self._on_wire().send(self._topics[TopicKind.INGEST_ACK], orjson.dumps(
            {"format_version": 1, "control_id": accepted.control_id}))
        if accepted.execute:
            await self._db(DeviceDatabase.execute, accepted)


def _close_built(opening: Future[DeviceDatabase]) -> None:
    """On the database thread, after the build (one thread: it ran first): close what
    it built, if it got that far."""
    if not opening.cancelled() and opening.exception() is None:
        opening.result().close()
