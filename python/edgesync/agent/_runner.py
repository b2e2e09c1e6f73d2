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
from edgesync.agent.capture._telemetry_state import OutboxBatch
from edgesync.agent.config import AgentConfig
from edgesync.agent.jobs._http_put import put_file
from edgesync.agent.jobs._uploads import UploadStatus, UploadStep
from edgesync.agent.link._inbox import Accepted
from edgesync.agent.link._publisher import MqttLink
from edgesync.agent.link._status import will_payload
from edgesync.errors import ConfigError, OversizedRowError
from edgesync.protocol import AgentState, TopicKind, periodic_loop, topic_for

__all__ = ["Agent"]

log = logging.getLogger("edgesync.agent")

P = ParamSpec("P")
T = TypeVar("T")


class Agent:
    def __init__(self, config: AgentConfig) -> None:
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
            self._device = await asyncio.wrap_future(opening)
            tasks = await self._stack.enter_async_context(asyncio.TaskGroup())
            link = tasks.create_task(self._link.run(), name="edgesync-agent-mqtt")
            self._stack.callback(link.cancel)  # runs first: the task group then ends
        except BaseException:
            await self._close(opening)
            raise
        self._lifecycle = AgentLifecycle.OPEN
        return self

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
        """The last status report (``stopped``), when the broker is there to take it."""
        if not self.connected:
            return
        try:
            payload = await self._db(DeviceDatabase.status_report, connected=True,
                                     state=AgentState.STOPPED)
            await asyncio.wait_for(
                self._link.publish(self._topics[TopicKind.INGEST_REQUEST], payload), 5.0)
        except Exception as exc:  # stopping anyway (a timeout included)
            log.debug("final status report not sent: %s", exc)

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
            for accepted in await self._db(DeviceDatabase.unfinished_controls):
                await self._ack_and_execute(accepted)
            plan = await self._db(DeviceDatabase.prepare_flush)
            for table, doc, is_telemetry in plan.observes:
                await self._link.publish(self._topics[TopicKind.SCHEMA_OBSERVE], doc)
                await self._db(DeviceDatabase.observed, table,
                               orjson.loads(doc)["schema_hash"], is_telemetry)
            for gap_id, doc in plan.gaps:
                await self._link.publish(self._topics[TopicKind.INGEST_REQUEST], doc)
                await self._db(DeviceDatabase.gap_reported, gap_id,
                               orjson.loads(doc)["source_table"])
            sent = 0
            for table in plan.rows_tables:
                sent += await self._flush_rows(table, plan.upto)
            for table in await self._db(DeviceDatabase.telemetry_tables):
                sent += await self._flush_telemetry(table)
            for job_id, report in await self._db(DeviceDatabase.recovery_reports):
                await self._link.publish(self._topics[TopicKind.INGEST_REQUEST], report)
                await self._db(DeviceDatabase.recovery_sent, job_id, report)
            await self._flush_uploads()
            status = await self._db(DeviceDatabase.due_status_report,  # last: data first
                                    connected=self.connected)
            if status is not None:
                await self._link.publish(self._topics[TopicKind.INGEST_REQUEST], status)
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
            await self._link.publish(request, up.request())
            await self._db(DeviceDatabase.upload_step, UploadStep.REQUESTED, up.upload_key)
        for up in await self._db(DeviceDatabase.uploads_in, UploadStatus.UPLOADED):
            await self._link.publish(request, up.finalize())
            await self._db(DeviceDatabase.upload_step, UploadStep.FINALIZED, up.upload_key)

    async def _flush_rows(self, table: str, upto: int) -> int:
        sent = 0
        while True:
            try:
                batch = await self._db(DeviceDatabase.next_batch, table, upto)
            except OversizedRowError as exc:
                # it goes by upload; the table goes on
                await self._db(DeviceDatabase.spill, exc)
                continue
            if batch is None:
                return sent
            await self._link.publish(self._topics[TopicKind.ROWS_BATCH], batch.payload)
            await self._db(DeviceDatabase.confirm, batch)
            sent += batch.row_count
            log.debug("published %d rows of %r (commit_seq %d..%d, batch %s)",
                      batch.row_count, table, batch.pending.first_commit_seq,
                      batch.pending.last_commit_seq, batch.pending.batch_id)

    async def _flush_telemetry(self, table: str) -> int:
        sent = 0
        for batch in await self._db(DeviceDatabase.telemetry_backlog, table):
            await self._publish_telemetry(batch)
            sent += batch.row_count
        while True:
            fresh = await self._db(DeviceDatabase.next_telemetry_batch, table)
            if fresh is None:
                return sent
            await self._publish_telemetry(fresh)
            sent += fresh.row_count

    async def _publish_telemetry(self, batch: OutboxBatch) -> None:
        await self._link.publish(self._topics[TopicKind.TELEMETRY_BATCH], batch.payload)
        await self._db(DeviceDatabase.telemetry_published, batch)
        log.debug("published %d telemetry rows of %r (batch_seq %d)", batch.row_count,
                  batch.source_table, batch.batch_seq)

    # ------------------------------------------------------------------ downlink

    async def _on_control(self, payload: bytes) -> None:
        accepted = await self._db(DeviceDatabase.accept, payload)
        if accepted is not None:
            await self._ack_and_execute(accepted)

    async def _ack_and_execute(self, accepted: Accepted) -> None:
        await self._link.publish(self._topics[TopicKind.INGEST_ACK], orjson.dumps(
            {"format_version": 1, "control_id": accepted.control_id}))
        if accepted.execute:
            await self._db(DeviceDatabase.execute, accepted)


def _close_built(opening: Future[DeviceDatabase]) -> None:
    """On the database thread, after the build (one thread: it ran first): close what
    it built, if it got that far."""
    if not opening.cancelled() and opening.exception() is None:
        opening.result().close()
