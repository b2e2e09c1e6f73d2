"""``Agent``: capture application changes and publish them; obey downlink controls.

    async with Agent(config) as agent:   # open DBs, install triggers, start MQTT link
        await agent.run()                 # flush every flush_interval, forever

All SQLite work happens on one dedicated thread (the connections are used nowhere
else), so a busy application database never blocks the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import logging
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn, Self, TypeVar

import orjson

from edgesync.agent._batcher import Batch, Batcher, truncate_journal
from edgesync.agent._config import AgentConfig
from edgesync.agent._discovery import discover
from edgesync.agent._downlink import Extras, execute_control
from edgesync.agent._freshness import SeenMarks
from edgesync.agent._http_put import put_file
from edgesync.agent._inbox import Accepted, ControlInbox
from edgesync.agent._lock import InstanceLock
from edgesync.agent._progress import resend_unconfirmed
from edgesync.agent._publisher import MqttLink
from edgesync.agent._remote_policy import RemotePolicy
from edgesync.agent._resnapshot import Resnapshots
from edgesync.agent._retention import JournalBudget
from edgesync.agent._source import open_source
from edgesync.agent._state import StateStore
from edgesync.agent._status import StatusReporter, will_payload
from edgesync.agent._telemetry import TelemetryCapture
from edgesync.agent._telemetry_state import OutboxBatch, TelemetryState
from edgesync.agent._triggers import JOURNAL_TABLE, install_triggers, quote_ident
from edgesync.agent._uploads import Upload, Uploads
from edgesync.agent._verify import Verifications
from edgesync.agent._writeback import CloudVersions
from edgesync.errors import ConfigError, OversizedRowError
from edgesync.protocol import AgentState, TopicKind, periodic_loop, topic_for

__all__ = ["Agent"]

log = logging.getLogger("edgesync.agent")

T = TypeVar("T")

BUSY_TIMEOUT_MS = 5000
# Published telemetry batches kept for a possible resume_lineage, as a share of
# local_retention_bytes (the cloud's progress control normally drops them first).
_TELEMETRY_OUTBOX_SHARE = 4
_JOURNAL = quote_ident(JOURNAL_TABLE)


class Agent:
    def __init__(self, config: AgentConfig) -> None:
        sec = config.security
        if sec.signed_control and not sec.auth_token:
            raise ConfigError("security.auth_token_env",
                              "required when security.signed_control.enabled is true "
                              "(its token is the control signing key)")
        self.config = config
        self._signing_key = (sec.auth_token.encode() if sec.signed_control and sec.auth_token
                             else None)
        root = config.connection.root_topic
        self._topics = {k: topic_for(root, k) for k in TopicKind}
        self._link = MqttLink(config.connection, self._on_control,
                              will=(self._topics[TopicKind.INGEST_REQUEST], will_payload()))
        self._executor: ThreadPoolExecutor | None = None
        self._source: sqlite3.Connection | None = None
        self._state: StateStore | None = None
        self._inbox: ControlInbox | None = None
        self._telemetry_state: TelemetryState | None = None
        self._telemetry: TelemetryCapture | None = None
        self._batcher: Batcher | None = None
        self._versions: CloudVersions | None = None
        self._uploads: Uploads | None = None
        self._resnapshots: Resnapshots | None = None
        self._verifications: Verifications | None = None
        self._budget: JournalBudget | None = None
        self._remote: RemotePolicy | None = None
        # When each journaled change was first seen (first_seen_at_ms), see _freshness.
        self._marks = SeenMarks()
        self._status: StatusReporter | None = None
        self._rows_tables: list[str] = []
        self._schema_version = -1
        self._flush_lock = asyncio.Lock()
        self._stack = contextlib.AsyncExitStack()
        self._link_task: asyncio.Task[Any] | None = None
        rep = config.replication
        self._lock = InstanceLock(rep.source_db_path, rep.state_db_path)

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Self:
        self._lock.acquire()  # before anything is opened: a second agent changes nothing
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
        await self._goodbye()
        if self._link_task is not None:
            self._link_task.cancel()
        try:
            await self._stack.__aexit__(exc_type, exc, tb)
        finally:
            await self._close()

    async def _goodbye(self) -> None:
        """The last status report (``stopped``), when the broker is there to take it."""
        if self._status is None or not self.connected or self._executor is None:
            return
        try:
            payload = await self._db(self._status_report, AgentState.STOPPED)
            await asyncio.wait_for(
                self._link.publish(self._topics[TopicKind.INGEST_REQUEST], payload), 5.0)
        except Exception as exc:  # stopping anyway (a timeout included)
            log.debug("final status report not sent: %s", exc)

    async def _close(self) -> None:
        if self._executor is None:
            return
        with contextlib.suppress(Exception):
            await self._db(self._close_dbs)
        self._executor.shutdown(wait=True)
        self._executor = None
        self._lock.release()

    async def _db(self, fn: Callable[..., T], *args: Any) -> T:
        assert self._executor is not None, "use `async with Agent(config)`"
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    # ------------------------------------------------------------------ public API

    @property
    def connected(self) -> bool:
        return self._link.connected.is_set()

    async def wait_connected(self) -> None:
        await self._link.connected.wait()

    async def run(self) -> NoReturn:
        """Flush every ``flush_interval`` until cancelled; a failed flush (broker trouble,
        a busy or failing database) is logged and retried with backoff (pending batches
        keep their ``batch_id``)."""
        await periodic_loop("agent flush", self.flush,
                            interval=self.config.replication.flush_interval_s, logger=log)

    async def flush(self) -> int:
        """Publish everything captured so far; returns how many rows were sent.

        Waits for the broker connection. Order: controls left unfinished by a crash,
        schema observations, gap reports, row batches, telemetry batches, uploads, the
        status report when due (every 30 s, docs/protocol.md). Each batch is
        recorded before it is published and confirmed after its PUBACK; journal rows
        and telemetry batches stay until the cloud's progress control says they are
        committed.
        """
        async with self._flush_lock:
            for accepted in await self._db(self._unfinished_controls):
                await self._ack_and_execute(accepted)
            upto, observes, gaps = await self._db(self._prepare_flush)
            for table, doc, is_telemetry in observes:
                await self._link.publish(self._topics[TopicKind.SCHEMA_OBSERVE], doc)
                await self._db(self._observed, table, orjson.loads(doc)["schema_hash"],
                               is_telemetry)
            for gap_id, doc in gaps:
                await self._link.publish(self._topics[TopicKind.INGEST_REQUEST], doc)
                await self._db(self._gap_reported, gap_id, orjson.loads(doc)["source_table"])
            sent = 0
            for table in self._rows_tables:
                sent += await self._flush_rows(table, upto)
            for table in await self._db(self._telemetry_tables):
                sent += await self._flush_telemetry(table)
            for job_id, report in await self._db(self._recovery_reports):
                await self._link.publish(self._topics[TopicKind.INGEST_REQUEST], report)
                await self._db(self._recovery_sent, job_id, report)
            await self._flush_uploads()
            if self._status is not None and self._status.due():  # last: data goes first
                await self._link.publish(self._topics[TopicKind.INGEST_REQUEST],
                                         await self._db(self._status_report))
            return sent

    async def _flush_uploads(self) -> None:
        """Move every upload on: PUT granted objects (or ask again when a grant is no
        good), request URLs, finalize what was uploaded."""
        request = self._topics[TopicKind.INGEST_REQUEST]
        for up in await self._db(self._uploads_in, "granted"):
            if up.expired(datetime.now(UTC)):
                await self._db(self._upload_step, "regrant", up.upload_key, "URL expired")
                continue
            path = await self._db(self._build_upload, up)
            if path is None:
                continue
            assert up.presigned_url is not None
            try:
                result = await asyncio.to_thread(put_file, up.presigned_url, path)
            except (OSError, http.client.HTTPException, ValueError) as exc:
                log.warning("upload %s: PUT failed: %s; retrying at the next flush",
                            up.batch_id, exc)
                continue
            if result.status in (200, 201, 204, 409):  # 409: an earlier attempt got there
                await self._db(self._upload_step, "uploaded", up.upload_key)
            elif result.status in (403, 404):
                await self._db(self._upload_step, "regrant", up.upload_key,
                               f"PUT refused: {result!r}")
            else:
                log.error("upload %s: PUT answered %r; retrying at the next flush",
                          up.batch_id, result)
        for up in await self._db(self._uploads_in, "wanted"):
            await self._link.publish(request, up.request())
            await self._db(self._upload_step, "requested", up.upload_key)
        for up in await self._db(self._uploads_in, "uploaded"):
            await self._link.publish(request, up.finalize())
            await self._db(self._upload_step, "finalized", up.upload_key)

    async def _flush_rows(self, table: str, upto: int) -> int:
        sent = 0
        while True:
            try:
                batch = await self._db(self._next_batch, table, upto)
            except OversizedRowError as exc:
                await self._db(self._spill, exc)  # it goes by upload; the table goes on
                continue
            if batch is None:
                return sent
            await self._link.publish(self._topics[TopicKind.ROWS_BATCH], batch.payload)
            await self._db(self._confirm, batch)
            sent += batch.row_count
            log.debug("published %d rows of %r (commit_seq %d..%d, batch %s)",
                      batch.row_count, table, batch.pending.first_commit_seq,
                      batch.pending.last_commit_seq, batch.pending.batch_id)

    async def _flush_telemetry(self, table: str) -> int:
        sent = 0
        for batch in await self._db(self._telemetry_backlog, table):
            await self._publish_telemetry(batch)
            sent += batch.row_count
        while True:
            fresh = await self._db(self._next_telemetry_batch, table)
            if fresh is None:
                return sent
            await self._publish_telemetry(fresh)
            sent += fresh.row_count

    async def _publish_telemetry(self, batch: OutboxBatch) -> None:
        await self._link.publish(self._topics[TopicKind.TELEMETRY_BATCH], batch.payload)
        await self._db(self._telemetry_published, batch)
        log.debug("published %d telemetry rows of %r (batch_seq %d)", batch.row_count,
                  batch.source_table, batch.batch_seq)

    # ------------------------------------------------------------------ DB thread

    def _open(self) -> None:
        rep = self.config.replication
        self._source = open_source(rep.source_db_path)
        self._source.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self._state = StateStore(rep.state_db_path)
        self._remote = RemotePolicy(self.config, self._state)
        self.config = self._remote.config()  # the YAML, or the sync policy it opted into
        self._inbox = ControlInbox(self._state, self._signing_key)
        self._telemetry_state = TelemetryState(self._state)
        self._telemetry = TelemetryCapture(self._source, self._telemetry_state,
                                           rep.telemetry_lookback_s)
        self._versions = CloudVersions(self._state)
        self._uploads = Uploads(self._source, self._state, rep.state_db_path.parent / "uploads")
        self._budget = JournalBudget(self._source, self._state, rep.local_retention_bytes,
                                     reserved=self._uploads.reserved)
        self._batcher = Batcher(self._source, self._state, forget=self._forget_journal,
                                lkcv=self._versions.add_lkcv, reserved=self._uploads.reserved,
                                first_seen=self._marks.first_seen_ms)
        self._resnapshots = Resnapshots(self._source, self._state, self._uploads)
        self._verifications = Verifications(self._source, self._state)
        self._status = StatusReporter(self._source, self._state, self._marks)
        self._refresh_schema()

    def _forget_journal(self, table: str, first: int, last: int) -> None:
        assert self._source is not None and self._budget is not None
        self._budget.deleted(table, first, last)
        truncate_journal(self._source, table, last, from_seq=first)

    def _close_dbs(self) -> None:
        if self._batcher is not None:
            self._batcher.close()
        if self._source is not None:
            self._source.close()
            self._source = None
        if self._state is not None:
            self._state.close()
            self._state = None

    def _refresh_schema(self) -> None:
        """Discover tables, (re)install triggers, record fingerprints."""
        assert self._source is not None and self._state is not None
        assert self._batcher is not None and self._telemetry is not None
        rep = self.config.replication
        found = discover(self._source, rep)
        installed = install_triggers(
            self._source, found.rows, busy_timeout_ms=BUSY_TIMEOUT_MS,
            snapshot=rep.snapshot_on_first_run,
            known=[t.source_table for t in self._state.tables()])
        if self._state.bind_journal(installed.journal_id):
            log.warning("the journal in %s was rebuilt; every table starts a new journal epoch",
                        rep.source_db_path)
        for name in installed.rebuilt:
            log.warning("table %r had lost its triggers (rebuilt or recreated); its rows were "
                        "journaled again", name)
        if installed.snapshotted:
            log.info("snapshot: existing rows of %s journaled", ", ".join(installed.snapshotted))
        self._batcher.set_tables(found.rows)
        for table in found.rows:
            schema_hash, canonical = table.fingerprint()
            self._state.ensure_table(table.name, schema_hash, canonical)
        for tt in found.telemetry:
            self._telemetry.register(tt, from_start=rep.snapshot_on_first_run)
        self._telemetry.tables = {t.name: t for t in found.telemetry}
        self._rows_tables = [t.name for t in found.rows]
        self._schema_version = int(
            self._source.execute("PRAGMA schema_version").fetchone()[0])
        log.info("capturing %d rows table(s) and %d telemetry table(s): %s",
                 len(found.rows), len(found.telemetry),
                 ", ".join([t.name for t in found.rows] + [t.name for t in found.telemetry])
                 or "(none)")

    def _status_report(self, state: AgentState = AgentState.RUNNING) -> bytes:
        assert self._status is not None and self._budget is not None
        return self._status.report(self._budget.total, connected=self.connected, state=state)

    def _poll_journal(self) -> int:
        """The journal's high-water mark, noted with the time (first_seen_at_ms)."""
        assert self._batcher is not None and self._source is not None
        upto = self._batcher.journal_high_water()
        self._marks.polled(upto)
        oldest = self._source.execute(f"SELECT min(commit_seq) FROM {_JOURNAL}").fetchone()[0]
        self._marks.prune(upto if oldest is None else int(oldest))
        return upto

    def _prepare_flush(self) -> tuple[int, list[tuple[str, bytes, bool]],
                                      list[tuple[int, bytes]]]:
        assert self._source is not None and self._state is not None
        assert self._batcher is not None and self._budget is not None
        assert self._telemetry_state is not None
        version = int(self._source.execute("PRAGMA schema_version").fetchone()[0])
        if version != self._schema_version:
            log.info("schema of the source database changed; reinstalling triggers")
            self._refresh_schema()
        self._budget.enforce()
        assert self._telemetry is not None and self._uploads is not None
        self._uploads.settle(self._forget_journal)
        upto = self._poll_journal()
        for table in self._rows_tables:
            self._reserve_backlog(table, upto)
        resend_unconfirmed(self._state, self._telemetry_state, self._rows_tables,
                           list(self._telemetry.tables),
                           time.time() - self.config.replication.confirm_timeout_s)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        observes: list[tuple[str, bytes, bool]] = []
        live = set(self._rows_tables)
        for ts in self._state.tables():
            if ts.source_table in live and ts.schema_hash and ts.observed_hash != ts.schema_hash:
                observes.append((ts.source_table, _observe(ts.source_table, ts.schema_hash, now),
                                 False))
        for name in self._telemetry.tables:
            tts = self._telemetry_state.table(name)
            if tts is not None and tts.schema_hash and tts.observed_hash != tts.schema_hash:
                observes.append((name, _observe(name, tts.schema_hash, now), True))
        gaps = [(gap_id, orjson.dumps({
            "format_version": 1, "request_kind": "gap_report", "source_table": table,
            "journal_epoch": epoch, "first_commit_seq": first, "last_commit_seq": last}))
            for gap_id, table, epoch, first, last in self._state.unreported_gaps()]
        return upto, observes, gaps

    def _recovery_reports(self) -> list[tuple[str, bytes]]:
        """Move re-snapshots on (new chunks, uploads reserved), then the reports due:
        re-snapshot progress and verification digests (docs/recovery.md)."""
        assert self._resnapshots is not None and self._verifications is not None
        assert self._batcher is not None
        self._resnapshots.step(self._batcher.table_info)
        return [*self._resnapshots.reports(),
                *self._verifications.reports(self._batcher.table_info)]

    def _recovery_sent(self, job_id: str, report: bytes) -> None:
        assert self._resnapshots is not None and self._verifications is not None
        if orjson.loads(report)["request_kind"] == "verify_digest":
            self._verifications.sent(job_id)
        else:
            self._resnapshots.reported(job_id, report)

    def _reserve_backlog(self, table: str, upto: int) -> None:
        """A backlog over ``upload_backlog_rows`` goes as one upload (the batcher skips
        reserved ranges); it starts after the table's pending batch, if any."""
        assert self._state is not None and self._uploads is not None
        threshold = self.config.replication.upload_backlog_rows
        ts = self._state.table(table)
        if not threshold or ts is None or ts.paused or ts.schema_hash is None:
            return
        after = ts.last_published_commit_seq
        pending = self._state.pending(table)
        if pending is not None and pending.journal_epoch == ts.journal_epoch:
            after = max(after, pending.last_commit_seq)
        self._uploads.backlog(table, ts.journal_epoch, after, upto, threshold)

    def _observed(self, table: str, schema_hash: str, is_telemetry: bool) -> None:
        assert self._state is not None and self._telemetry_state is not None
        if is_telemetry:
            self._telemetry_state.mark_observed(table, schema_hash)
        else:
            self._state.mark_observed(table, schema_hash)

    def _gap_reported(self, gap_id: int, table: str) -> None:
        assert self._state is not None and self._uploads is not None
        assert self._batcher is not None
        # Re-seed first: a crash in between re-seeds twice (harmless), never not at all.
        info, ts = self._batcher.table_info(table), self._state.table(table)
        if info is not None and ts is not None:
            self._uploads.reseed(info, ts.journal_epoch)
        self._state.gap_reported(gap_id)

    def _spill(self, exc: OversizedRowError) -> None:
        assert self._state is not None and self._uploads is not None
        ts = self._state.table(exc.table)
        assert ts is not None
        self._uploads.spill(exc.table, ts.journal_epoch, exc.commit_seq)

    def _uploads_in(self, status: str) -> list[Upload]:
        assert self._uploads is not None
        return self._uploads.with_status(status)

    def _upload_step(self, step: str, key: int, why: str = "") -> None:
        assert self._uploads is not None
        if step == "requested":
            self._uploads.requested(key)
        elif step == "regrant":
            self._uploads.regrant(key, why)
        elif step == "uploaded":
            self._uploads.uploaded(key)
        else:
            self._uploads.finalized(key)

    def _build_upload(self, up: Upload) -> Path | None:
        assert self._state is not None and self._uploads is not None
        assert self._batcher is not None
        info, ts = self._batcher.table_info(up.source_table), self._state.table(up.source_table)
        if info is None or ts is None or ts.schema_hash is None:
            return None
        if ts.journal_epoch != up.journal_epoch:
            self._uploads.drop_epoch(up.source_table, ts.journal_epoch)
            return None
        return self._uploads.build(up, info, ts.schema_hash, ts.schema_json,
                                   self._batcher.read_range)

    def _next_batch(self, table: str, upto: int) -> Batch | None:
        assert self._batcher is not None
        return self._batcher.next_batch(table, upto=upto)

    def _confirm(self, batch: Batch) -> None:
        assert self._state is not None
        self._state.confirm(batch.pending, time.time())

    def _telemetry_tables(self) -> list[str]:
        assert self._telemetry is not None
        return list(self._telemetry.tables)

    def _telemetry_backlog(self, table: str) -> list[OutboxBatch]:
        assert self._telemetry_state is not None
        st = self._telemetry_state.table(table)
        if st is None or st.paused:
            return []
        return self._telemetry_state.unpublished(table)

    def _next_telemetry_batch(self, table: str) -> OutboxBatch | None:
        assert self._telemetry is not None
        return self._telemetry.next_batch(table)

    def _telemetry_published(self, batch: OutboxBatch) -> None:
        assert self._telemetry_state is not None
        self._telemetry_state.published(batch, time.time())
        self._telemetry_state.trim_published(
            batch.source_table,
            self.config.replication.local_retention_bytes // _TELEMETRY_OUTBOX_SHARE)

    # ------------------------------------------------------------------ downlink

    def _accept(self, payload: bytes) -> Accepted | None:
        assert self._inbox is not None
        return self._inbox.accept(payload)

    def _unfinished_controls(self) -> list[Accepted]:
        assert self._inbox is not None
        return self._inbox.unfinished()

    def _execute(self, accepted: Accepted) -> None:
        assert self._source is not None and self._state is not None
        assert self._telemetry_state is not None and self._inbox is not None
        assert self._batcher is not None and self._versions is not None
        assert self._uploads is not None
        execute_control(accepted.doc, self._source, self._state, self._telemetry_state,
                        self._budget, Extras(self._batcher.table_info, self._versions,
                                             self._uploads, self._resnapshots,
                                             self._verifications, self._apply_policy))
        self._inbox.executed(accepted.control_id)

    def _apply_policy(self, doc: dict[str, Any]) -> None:
        """A ``sync_policy`` control: where the YAML opts in, run with its strategies from
        now on (tables discovered and triggers installed again, no restart)."""
        assert self._remote is not None
        if self._remote.receive(doc):
            self.config = self._remote.config()
            self._refresh_schema()

    async def _on_control(self, payload: bytes) -> None:
        accepted = await self._db(self._accept, payload)
        if accepted is not None:
            await self._ack_and_execute(accepted)

    async def _ack_and_execute(self, accepted: Accepted) -> None:
        await self._link.publish(self._topics[TopicKind.INGEST_ACK], orjson.dumps(
            {"format_version": 1, "control_id": accepted.control_id}))
        if accepted.execute:
            await self._db(self._execute, accepted)


def _observe(table: str, schema_hash: str, now: str) -> bytes:
    return orjson.dumps({"format_version": 1, "source_table": table,
                         "schema_hash": schema_hash, "observed_at": now})
