"""``Agent``: capture application changes and publish them as row batches.

    async with Agent(config) as agent:   # open DBs, install triggers, start MQTT link
        await agent.run()                 # flush every flush_interval, forever

All SQLite work happens on one dedicated thread (the connections are used nowhere
else), so a busy application database never blocks the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, Self, TypeVar

import orjson

from edgesync.agent._batcher import Batch, Batcher, OversizedRowError, truncate_journal
from edgesync.agent._config import AgentConfig
from edgesync.agent._discovery import discover
from edgesync.agent._publisher import MqttLink, raise_if_cancelling
from edgesync.agent._state import StateStore
from edgesync.agent._triggers import install_triggers
from edgesync.errors import BrokerError, ConfigError
from edgesync.protocol import TopicKind, topic_for

__all__ = ["Agent"]

log = logging.getLogger("edgesync.agent")

T = TypeVar("T")

BUSY_TIMEOUT_MS = 5000


class Agent:
    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        root = config.connection.root_topic
        self._rows_topic = topic_for(root, TopicKind.ROWS_BATCH)
        self._ack_topic = topic_for(root, TopicKind.INGEST_ACK)
        self._link = MqttLink(config.connection, self._on_control)
        self._executor: ThreadPoolExecutor | None = None
        self._source: sqlite3.Connection | None = None
        self._state: StateStore | None = None
        self._batcher: Batcher | None = None
        self._schema_version = -1
        self._flush_lock = asyncio.Lock()
        self._stack = contextlib.AsyncExitStack()
        self._link_task: asyncio.Task[Any] | None = None

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Self:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="edgesync-agent-db")
        try:
            await self._db(self._open)
            tasks = await self._stack.enter_async_context(asyncio.TaskGroup())
            self._link_task = tasks.create_task(self._link.run(), name="edgesync-agent-mqtt")
        except BaseException:
            await self._close()
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._link_task is not None:
            self._link_task.cancel()
        try:
            await self._stack.__aexit__(exc_type, exc, tb)
        finally:
            await self._close()

    async def _close(self) -> None:
        if self._executor is None:
            return
        with contextlib.suppress(Exception):
            await self._db(self._close_dbs)
        self._executor.shutdown(wait=True)
        self._executor = None

    async def _db(self, fn: Callable[..., T], *args: Any) -> T:
        assert self._executor is not None, "use `async with Agent(config)`"
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    # ------------------------------------------------------------------ public API

    @property
    def connected(self) -> bool:
        return self._link.connected.is_set()

    async def wait_connected(self) -> None:
        await self._link.connected.wait()

    async def run(self) -> None:
        """Flush every ``flush_interval`` until cancelled; broker trouble is logged and
        retried (pending batches keep their ``batch_id``)."""
        interval = self.config.replication.flush_interval_s
        while True:
            try:
                await self.flush()
            except BrokerError as exc:
                log.warning("flush postponed: %s", exc)
            raise_if_cancelling()
            await asyncio.sleep(interval)

    async def flush(self) -> int:
        """Publish every journal row captured so far; returns how many rows were sent.

        Waits for the broker connection. Each batch is recorded as pending before it is
        published and confirmed after its PUBACK; journal rows stay until the cloud's
        progress control says they are committed.
        """
        async with self._flush_lock:
            upto, tables = await self._db(self._prepare_flush)
            sent = 0
            for table in tables:
                while True:
                    try:
                        batch = await self._db(self._next_batch, table, upto)
                    except OversizedRowError as exc:
                        log.error("%s", exc)
                        break
                    if batch is None:
                        break
                    await self._link.publish(self._rows_topic, batch.payload)
                    await self._db(self._confirm, batch)
                    sent += batch.row_count
                    log.debug("published %d rows of %r (commit_seq %d..%d, batch %s)",
                              batch.row_count, table, batch.pending.first_commit_seq,
                              batch.pending.last_commit_seq, batch.pending.batch_id)
            return sent

    # ------------------------------------------------------------------ DB thread

    def _open(self) -> None:
        rep = self.config.replication
        if not rep.source_db_path.is_file():
            raise ConfigError("sqlite-replication.source_db_path",
                              f"file {str(rep.source_db_path)!r} does not exist")
        uri = rep.source_db_path.resolve().as_uri() + "?mode=rw"
        self._source = sqlite3.connect(uri, uri=True, isolation_level=None,
                                       check_same_thread=False)
        self._source.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self._state = StateStore(rep.state_db_path)
        self._batcher = Batcher(self._source, self._state)
        self._refresh_schema()

    def _close_dbs(self) -> None:
        if self._source is not None:
            self._source.close()
            self._source = None
        if self._state is not None:
            self._state.close()
            self._state = None

    def _refresh_schema(self) -> None:
        """Discover tables, (re)install triggers, record fingerprints."""
        assert self._source is not None and self._state is not None
        found = discover(self._source, self.config.replication)
        journal_id = install_triggers(self._source, found.rows, busy_timeout_ms=BUSY_TIMEOUT_MS)
        if self._state.bind_journal(journal_id):
            log.warning("the journal in %s was rebuilt; every table starts a new journal epoch",
                        self.config.replication.source_db_path)
        for table in found.rows:
            schema_hash, canonical = table.fingerprint()
            self._state.ensure_table(table.name, schema_hash, canonical)
        self._schema_version = int(
            self._source.execute("PRAGMA schema_version").fetchone()[0])
        log.info("capturing %d table(s): %s", len(found.rows),
                 ", ".join(t.name for t in found.rows) or "(none)")

    def _prepare_flush(self) -> tuple[int, list[str]]:
        assert self._source is not None and self._state is not None
        assert self._batcher is not None
        version = int(self._source.execute("PRAGMA schema_version").fetchone()[0])
        if version != self._schema_version:
            log.info("schema of the source database changed; reinstalling triggers")
            self._refresh_schema()
        return (self._batcher.journal_high_water(),
                [t.source_table for t in self._state.tables()])

    def _next_batch(self, table: str, upto: int) -> Batch | None:
        assert self._batcher is not None
        return self._batcher.next_batch(table, upto=upto)

    def _confirm(self, batch: Batch) -> None:
        assert self._state is not None
        self._state.confirm(batch.pending)

    def _apply_progress(self, table: str, epoch: str, committed: int) -> int:
        assert self._source is not None and self._state is not None
        ts = self._state.table(table)
        if ts is None or ts.journal_epoch != epoch:
            log.warning("progress for %r ignored: journal epoch %s is not the current one (%s)",
                        table, epoch, ts.journal_epoch if ts else "unknown table")
            return 0
        deleted = truncate_journal(self._source, table, committed)
        self._state.record_progress(table, committed)
        return deleted

    # ------------------------------------------------------------------ downlink

    async def _on_control(self, payload: bytes) -> None:
        try:
            msg = orjson.loads(payload)
        except orjson.JSONDecodeError:
            log.warning("ignoring a control message that is not JSON (%d bytes)", len(payload))
            return
        control_id = msg.get("control_id") if isinstance(msg, dict) else None
        if not isinstance(control_id, str) or not control_id:
            log.warning("ignoring a control message without control_id")
            return
        await self._link.publish(self._ack_topic, orjson.dumps(
            {"format_version": 1, "control_id": control_id}))
        kind = msg.get("control_kind")
        if kind == "progress":
            await self._handle_progress(control_id, msg)
        else:
            log.info("control %s (%s) acknowledged; kind not yet supported", control_id, kind)

    async def _handle_progress(self, control_id: str, msg: dict[str, Any]) -> None:
        table = msg.get("source_table")
        epoch = msg.get("journal_epoch")
        committed = msg.get("committed_commit_seq")
        if not (isinstance(table, str) and isinstance(epoch, str)
                and isinstance(committed, int) and not isinstance(committed, bool)
                and committed >= 0):
            log.warning("progress control %s is malformed (needs source_table, journal_epoch, "
                        "committed_commit_seq); ignored", control_id)
            return
        deleted = await self._db(self._apply_progress, table, epoch, committed)
        log.info("progress %s: %r committed up to %d; %d journal row(s) removed",
                 control_id, table, committed, deleted)
