"""``DeviceDatabase``: the device's two SQLite files and every store over them.

``DeviceDatabase(config, signing_key=…, marks=…)`` opens the application database (the
*source*, with its journal and triggers) and ``state.db`` (brought to its last schema
version by ``_state_schema``), applies the sync policy ``state.db`` remembers, builds
every store (state, control inbox, telemetry, write-back versions, uploads, journal
budget, batcher, re-snapshots, verifications, status reports), installs the triggers
and registers the tables — all in the constructor. When it returns nothing is missing,
so no method has to ask whether a store exists; when a step fails, whatever was opened
is closed again before the error propagates.

It is synchronous and not thread-safe: the agent (``_runner``, the async shell) calls
it only from its one database thread. Each method is one step of a flush or of a
control — a short piece of database work between two awaits of the shell.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from edgesync.agent._state import StateStore
from edgesync.agent.capture._batcher import Batch, Batcher, truncate_journal
from edgesync.agent.capture._discovery import TableInfo, discover
from edgesync.agent.capture._freshness import SeenMarks
from edgesync.agent.capture._retention import JournalBudget
from edgesync.agent.capture._source import open_source
from edgesync.agent.capture._telemetry import TelemetryCapture
from edgesync.agent.capture._telemetry_state import OutboxBatch, TelemetryState
from edgesync.agent.capture._triggers import JOURNAL_TABLE, install_triggers, quote_ident
from edgesync.agent.config import AgentConfig
from edgesync.agent.jobs._resnapshot import Resnapshots
from edgesync.agent.jobs._uploads import Upload, Uploads, UploadStatus, UploadStep
from edgesync.agent.jobs._verify import Verifications
from edgesync.agent.jobs._writeback import CloudVersions
from edgesync.agent.link._downlink import execute_control
from edgesync.agent.link._inbox import Accepted, ControlInbox
from edgesync.agent.link._progress import resend_unconfirmed
from edgesync.agent.link._remote_policy import RemotePolicy
from edgesync.agent.link._status import StatusReporter
from edgesync.errors import DeviceStateError, OversizedRowError
from edgesync.protocol import AgentState

__all__ = ["BUSY_TIMEOUT_MS", "DeviceDatabase", "FlushPlan"]

log = logging.getLogger("edgesync.agent")

BUSY_TIMEOUT_MS = 5000
# Published telemetry batches kept for a possible resume_lineage, as a share of
# local_retention_bytes (the cloud's progress control normally drops them first).
_TELEMETRY_OUTBOX_SHARE = 4
_JOURNAL = quote_ident(JOURNAL_TABLE)


@dataclass(frozen=True, slots=True)
class FlushPlan:
    """What a flush publishes before the batches: schema observations
    ``(table, doc, is_telemetry)`` and gap reports ``(gap_id, doc)``; then the batches
    of ``rows_tables`` up to ``upto``, the journal's high-water mark."""

    upto: int
    rows_tables: list[str]
    observes: list[tuple[str, bytes, bool]]
    gaps: list[tuple[int, bytes]]


class DeviceDatabase:
    def __init__(self, config: AgentConfig, *, signing_key: bytes | None,
                 marks: SeenMarks) -> None:
        rep = config.replication
        self._marks = marks
        with contextlib.ExitStack() as opened:  # closed again unless every step succeeds
            self.source = open_source(rep.source_db_path)
            opened.callback(self.source.close)
            self.source.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self.state = StateStore(rep.state_db_path)
            opened.callback(self.state.close)
            self.remote = RemotePolicy(config, self.state)
            # The configuration in force: the YAML's, or the sync policy it opted into.
            self.config = self.remote.config()
            self.inbox = ControlInbox(self.state, signing_key)
            self.telemetry_state = TelemetryState(self.state)
            self.telemetry = TelemetryCapture(self.source, self.telemetry_state,
                                              rep.telemetry_lookback_s)
            self.versions = CloudVersions(self.state)
            self.uploads = Uploads(self.source, self.state, rep.state_db_path.parent / "uploads")
            self.budget = JournalBudget(self.source, self.state, rep.local_retention_bytes,
                                        reserved=self.uploads.reserved)
            self.batcher = Batcher(self.source, self.state, forget=self.forget_journal,
                                   lkcv=self.versions.add_lkcv, reserved=self.uploads.reserved,
                                   first_seen=marks.first_seen_ms)
            opened.callback(self.batcher.close)
            self.resnapshots = Resnapshots(self.source, self.state, self.uploads)
            self.verifications = Verifications(self.source, self.state)
            self.status = StatusReporter(self.source, self.state, marks)
            self.rows_tables: list[str] = []
            self._schema_version = -1
            self.refresh_schema()
            opened.pop_all()  # built: close() releases them from now on

    def close(self) -> None:
        self.batcher.close()
        self.source.close()
        self.state.close()

    # ------------------------------------------------------------------ the source's tables

    def refresh_schema(self) -> None:
        """Discover tables, (re)install triggers, record fingerprints."""
        rep = self.config.replication
        found = discover(self.source, rep)
        installed = install_triggers(
            self.source, found.rows, busy_timeout_ms=BUSY_TIMEOUT_MS,
            snapshot=rep.snapshot_on_first_run,
            known=[t.source_table for t in self.state.tables()])
        if self.state.bind_journal(installed.journal_id):
            log.warning("the journal in %s was rebuilt; every table starts a new journal epoch",
                        rep.source_db_path)
        for name in installed.rebuilt:
            log.warning("table %r had lost its triggers (rebuilt or recreated); its rows were "
                        "journaled again", name)
        if installed.snapshotted:
            log.info("snapshot: existing rows of %s journaled", ", ".join(installed.snapshotted))
        self.batcher.set_tables(found.rows)
        for table in found.rows:
            schema_hash, canonical = table.fingerprint()
            self.state.ensure_table(table.name, schema_hash, canonical)
        for tt in found.telemetry:
            self.telemetry.register(tt, from_start=rep.snapshot_on_first_run)
        self.telemetry.tables = {t.name: t for t in found.telemetry}
        self.rows_tables = [t.name for t in found.rows]
        self._schema_version = int(
            self.source.execute("PRAGMA schema_version").fetchone()[0])
        log.info("capturing %d rows table(s) and %d telemetry table(s): %s",
                 len(found.rows), len(found.telemetry),
                 ", ".join([t.name for t in found.rows] + [t.name for t in found.telemetry])
                 or "(none)")

    def forget_journal(self, table: str, first: int, last: int) -> None:
        self.budget.deleted(table, first, last)
        truncate_journal(self.source, table, last, from_seq=first)

    def table_info(self, table: str) -> TableInfo | None:
        return self.batcher.table_info(table)

    # ------------------------------------------------------------------ a flush

    def status_report(self, *, connected: bool, usage: dict[str, int | None],
                      state: AgentState = AgentState.RUNNING) -> bytes:
        """The report now; ``usage``: the wire figures (``bytes_sent``,
        ``budget_left_bytes``) the agent's budget keeps."""
        return self.status.report(self.budget.total, connected=connected, state=state,
                                  usage=usage, rows_tables=self.rows_tables)

    def due_status_report(self, *, connected: bool, usage: dict[str, int | None]
                          ) -> bytes | None:
        """The status report when one is due (every ``REPORT_INTERVAL_S``), else None."""
        return (self.status_report(connected=connected, usage=usage) if self.status.due()
                else None)

    def bytes_sent(self, day: str, count: int) -> None:
        self.state.add_bytes_sent(day, count)

    def poll_journal(self) -> int:
        """The journal's high-water mark, noted with the time (first_seen_at_ms)."""
        upto = self.batcher.journal_high_water()
        self._marks.polled(upto)
        oldest = self.source.execute(f"SELECT min(commit_seq) FROM {_JOURNAL}").fetchone()[0]
        self._marks.prune(upto if oldest is None else int(oldest))
        return upto

    def prepare_flush(self) -> FlushPlan:
        version = int(self.source.execute("PRAGMA schema_version").fetchone()[0])
        if version != self._schema_version:
            log.info("schema of the source database changed; reinstalling triggers")
            self.refresh_schema()
        self.budget.enforce()
        self.uploads.settle(self.forget_journal)
        upto = self.poll_journal()
        for table in self.rows_tables:
            self._reserve_backlog(table, upto)
        resend_unconfirmed(self.state, self.telemetry_state, self.rows_tables,
                           list(self.telemetry.tables),
                           time.time() - self.config.replication.confirm_timeout_s)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        observes: list[tuple[str, bytes, bool]] = []
        live = set(self.rows_tables)
        for ts in self.state.tables():
            if ts.source_table in live and ts.schema_hash and ts.observed_hash != ts.schema_hash:
                observes.append((ts.source_table, _observe(ts.source_table, ts.schema_hash, now),
                                 False))
        for name in self.telemetry.tables:
            tts = self.telemetry_state.table(name)
            if tts is not None and tts.schema_hash and tts.observed_hash != tts.schema_hash:
                observes.append((name, _observe(name, tts.schema_hash, now), True))
        gaps = [(gap_id, orjson.dumps({
            "format_version": 1, "request_kind": "gap_report", "source_table": table,
            "journal_epoch": epoch, "first_commit_seq": first, "last_commit_seq": last}))
            for gap_id, table, epoch, first, last in self.state.unreported_gaps()]
        return FlushPlan(upto, list(self.rows_tables), observes, gaps)

    def _reserve_backlog(self, table: str, upto: int) -> None:
        """A backlog over ``upload_backlog_rows`` goes as one upload (the batcher skips
        reserved ranges); it starts after the table's pending batch, if any."""
        threshold = self.config.replication.upload_backlog_rows
        ts = self.state.table(table)
        if not threshold or ts is None or ts.paused or ts.schema_hash is None:
            return
        after = ts.last_published_commit_seq
        pending = self.state.pending(table)
        if pending is not None and pending.journal_epoch == ts.journal_epoch:
            after = max(after, pending.last_commit_seq)
        self.uploads.backlog(table, ts.journal_epoch, after, upto, threshold)

    def observed(self, table: str, schema_hash: str, is_telemetry: bool) -> None:
        if is_telemetry:
            self.telemetry_state.mark_observed(table, schema_hash)
        else:
            self.state.mark_observed(table, schema_hash)

    def gap_reported(self, gap_id: int, table: str) -> None:
        # Re-seed first: a crash in between re-seeds twice (harmless), never not at all.
        info, ts = self.batcher.table_info(table), self.state.table(table)
        if info is not None and ts is not None:
            self.uploads.reseed(info, ts.journal_epoch)
        self.state.gap_reported(gap_id)

    def next_batch(self, table: str, upto: int) -> Batch | None:
        return self.batcher.next_batch(table, upto=upto)

    def spill(self, exc: OversizedRowError) -> None:
        ts = self.state.table(exc.table)
        if ts is None:  # the batcher reads the same row before it raises
            raise DeviceStateError(f"table {exc.table!r} is not registered in "
                                   f"{str(self.state.path)!r}; restart the agent")
        self.uploads.spill(exc.table, ts.journal_epoch, exc.commit_seq)

    def confirm(self, batch: Batch) -> None:
        self.state.confirm(batch.pending, time.time())

    def telemetry_tables(self) -> list[str]:
        return list(self.telemetry.tables)

    def next_telemetry(self, table: str) -> OutboxBatch | None:
        """The table's next batch to publish: the oldest unpublished one, else a new one."""
        st = self.telemetry_state.table(table)
        if st is not None and not st.paused:
            for batch in self.telemetry_state.unpublished(table, limit=1):
                return batch
        return self.telemetry.next_batch(table)

    def telemetry_published(self, batch: OutboxBatch) -> None:
        self.telemetry_state.published(batch, time.time())
        self.telemetry_state.trim_published(
            batch.source_table,
            self.config.replication.local_retention_bytes // _TELEMETRY_OUTBOX_SHARE)

    def recovery_reports(self) -> list[tuple[str, bytes]]:
        """Move re-snapshots on (new chunks, uploads reserved), then the reports due:
        re-snapshot progress and verification digests (docs/recovery.md)."""
        self.resnapshots.step(self.batcher.table_info)
        return [*self.resnapshots.reports(),
                *self.verifications.reports(self.batcher.table_info)]

    def recovery_sent(self, job_id: str, report: bytes) -> None:
        if orjson.loads(report)["request_kind"] == "verify_digest":
            self.verifications.sent(job_id)
        else:
            self.resnapshots.reported(job_id, report)

    # ------------------------------------------------------------------ uploads

    def uploads_in(self, status: UploadStatus) -> list[Upload]:
        return self.uploads.with_status(status)

    def upload_step(self, step: UploadStep, key: int, why: str = "") -> None:
        match step:
            case UploadStep.REQUESTED:
                self.uploads.requested(key)
            case UploadStep.REGRANT:
                self.uploads.regrant(key, why)
            case UploadStep.UPLOADED:
                self.uploads.uploaded(key)
            case UploadStep.FINALIZED:
                self.uploads.finalized(key)

    def build_upload(self, up: Upload) -> Path | None:
        info, ts = self.batcher.table_info(up.source_table), self.state.table(up.source_table)
        if info is None or ts is None or ts.schema_hash is None:
            return None
        if ts.journal_epoch != up.journal_epoch:
            self.uploads.drop_epoch(up.source_table, ts.journal_epoch)
            return None
        return self.uploads.build(up, info, ts.schema_hash, ts.schema_json,
                                  self.batcher.read_range)

    # ------------------------------------------------------------------ downlink

    def accept(self, payload: bytes) -> Accepted | None:
        return self.inbox.accept(payload)

    def unfinished_controls(self) -> list[Accepted]:
        return self.inbox.unfinished()

    def execute(self, accepted: Accepted) -> None:
        execute_control(accepted.doc, self)
        self.inbox.executed(accepted.control_id)

    def apply_policy(self, doc: dict[str, Any]) -> None:
        """A ``sync_policy`` control: where the YAML opts in, run with its strategies from
        now on (tables discovered and triggers installed again, no restart)."""
        if self.remote.receive(doc):
            self.config = self.remote.config()
            self.refresh_schema()


def _observe(table: str, schema_hash: str, now: str) -> bytes:
    return orjson.dumps({"format_version": 1, "source_table": table,
                         "schema_hash": schema_hash, "observed_at": now})
