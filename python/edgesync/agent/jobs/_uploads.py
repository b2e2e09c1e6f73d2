"""Large objects over HTTP: bootstrap snapshots after a capture gap, and payload spills.

An upload ships a *reserved* range of journal rows of one table instead of MQTT:

* ``bootstrap_snapshot`` (``reseed``): after a ``gap_report``, every current row of the
  table is journaled as an ``insert`` in one transaction (as ``snapshot_on_first_run``
  does); those rows are the range.
* ``payload_spill`` (``spill``): one journal row too large for a 512 KiB batch.
* ``payload_spill`` (``backlog``): a table's unsent journal backlog larger than
  ``upload_backlog_rows`` (at most ``BACKLOG_MAX_ROWS`` rows per upload; one such
  upload per table at a time, so reserved ranges — which retention never drops — stay
  bounded while a device is offline).

The batcher skips reserved ranges. Each upload moves through ``state.db``:
``wanted`` → (``url_request`` published) ``requested`` → (``url_grant``) ``granted`` →
(object PUT) ``uploaded`` → (``finalize`` published) ``finalized`` → done, once progress
controls confirmed every row it carried (the cloud cuts the object into ordinary
batches and confirms those; when only the rows whose table row was gone at upload time
are left in the range, the whole range is deleted). A grant whose URL expired, or a
PUT refused with 403/404, goes back to ``wanted``.

The object is zstd-compressed JSON lines (a frame per page of rows): a header (``format_version``,
``capture_strategy``, ``source_table``, ``journal_epoch``, ``schema_hash``,
``schema_columns``) and then one row operation per line, as in a row batch.
"""

from __future__ import annotations

import enum
import logging
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from edgesync._core import ROW_CAPTURE_STRATEGY, SUPPORTED_FORMAT_VERSION, compress_blob
from edgesync.agent._state import StateStore
from edgesync.agent.capture._batcher import JournalRow
from edgesync.agent.capture._discovery import TableInfo
from edgesync.agent.capture._triggers import JOURNAL_TABLE, quote_ident, snapshot_sql

__all__ = ["BACKLOG_MAX_ROWS", "Upload", "UploadStatus", "UploadStep", "Uploads"]


class UploadStatus(enum.StrEnum):
    """An upload's row in state.db (``uploads.status``)."""

    WANTED = "wanted"  # the backlog is too big for batches: ask for a URL
    REQUESTED = "requested"  # url_request sent
    GRANTED = "granted"  # the cloud answered with a presigned URL: PUT the object
    UPLOADED = "uploaded"  # PUT done: send finalize
    FINALIZED = "finalized"  # finalize sent: the rows go once the cloud confirms them


class UploadStep(enum.StrEnum):
    """What happened to an upload, as the runner tells the device database."""

    REQUESTED = "requested"  # its url_request went out
    REGRANT = "regrant"  # the URL expired or the PUT was refused: ask again
    UPLOADED = "uploaded"  # the PUT succeeded
    FINALIZED = "finalized"  # its finalize went out

log = logging.getLogger("edgesync.agent")

_J = quote_ident(JOURNAL_TABLE)
# Journal rows per backlog upload: a few hundred MB of JSON at most before zstd, far
# below the 1 GiB object limit for ordinary rows.
BACKLOG_MAX_ROWS = 500_000

# (table info, first, last) -> pages of journal rows of the range, lkcv applied
RangeReader = Callable[[TableInfo, int, int], Iterator[list[JournalRow]]]


@dataclass(frozen=True, slots=True)
class Upload:
    upload_key: int
    source_table: str
    segment_kind: str
    journal_epoch: str
    first_commit_seq: int
    last_commit_seq: int
    status: UploadStatus
    batch_id: str | None
    presigned_url: str | None
    expires_at: str | None
    gone_rows: int | None

    def request(self) -> bytes:
        return orjson.dumps({"format_version": 1, "request_kind": "url_request",
                             "source_table": self.source_table,
                             "segment_kind": self.segment_kind})

    def finalize(self) -> bytes:
        return orjson.dumps({"format_version": 1, "request_kind": "finalize",
                             "source_table": self.source_table, "batch_id": self.batch_id,
                             "segment_kind": self.segment_kind})

    def expired(self, now: datetime) -> bool:
        if not self.expires_at:
            return True
        try:
            at = datetime.fromisoformat(self.expires_at.replace("Z", "+00:00"))
        except ValueError:
            return True
        return now >= (at if at.tzinfo else at.replace(tzinfo=UTC))


_COLS = ("upload_key, source_table, segment_kind, journal_epoch, first_commit_seq, "
         "last_commit_seq, status, batch_id, presigned_url, expires_at, gone_rows")


class Uploads:
    """Upload bookkeeping in ``state.db``; runs on the agent's database thread."""

    def __init__(self, source: sqlite3.Connection, state: StateStore, spool: Path) -> None:
        self._src = source
        self._state = state
        self._db = state.db
        self.spool = spool

    def _rows(self, where: str, args: tuple[Any, ...] = ()) -> list[Upload]:
        rows = [Upload(*r) for r in self._db.execute(
            f"SELECT {_COLS} FROM uploads WHERE {where} ORDER BY upload_key", args)]
        return [replace(up, status=UploadStatus(up.status)) for up in rows]

    def all(self) -> list[Upload]:
        return self._rows("1")

    def with_status(self, status: UploadStatus) -> list[Upload]:
        return self._rows("status = ?", (status,))

    def reserved(self, table: str, epoch: str) -> list[tuple[int, int]]:
        """Journal ranges of ``table`` that travel by upload (the batcher skips them)."""
        return [(u.first_commit_seq, u.last_commit_seq)
                for u in self._rows("source_table = ? AND journal_epoch = ?", (table, epoch))]

    def _add(self, table: str, kind: str, epoch: str, first: int, last: int) -> None:
        with self._state.tx():
            self._db.execute(
                "INSERT INTO uploads (source_table, segment_kind, journal_epoch, "
                "first_commit_seq, last_commit_seq) VALUES (?, ?, ?, ?, ?)",
                (table, kind, epoch, first, last))

    # -- starting an upload

    def reserve(self, table: str, kind: str, epoch: str, first: int, last: int) -> None:
        """Reserve a journal range already written (a re-snapshot chunk) for an upload."""
        self._add(table, kind, epoch, first, last)

    def spill(self, table: str, epoch: str, commit_seq: int) -> None:
        """One journal row too large for a batch travels as a ``payload_spill``."""
        known = self._rows("source_table = ? AND journal_epoch = ? AND first_commit_seq <= ? "
                           "AND last_commit_seq >= ?", (table, epoch, commit_seq, commit_seq))
        if not known:
            self._add(table, "payload_spill", epoch, commit_seq, commit_seq)
            log.warning("table %r: commit_seq %d is too large for a batch; sending it as a "
                        "payload_spill upload", table, commit_seq)

    def backlog(self, table: str, epoch: str, after: int, upto: int, threshold: int,
                max_rows: int = BACKLOG_MAX_ROWS) -> tuple[int, int] | None:
        """When more than ``threshold`` journal rows of ``table`` wait with ``after <
        commit_seq <= upto``, reserve the oldest of them (at most ``max_rows``) for a
        ``payload_spill`` upload; returns the range. Not while another backlog upload of
        the table is open, and never over a range already reserved (the range ends
        before it; when one starts right at the first waiting row, the batcher skips it
        first)."""
        if threshold <= 0 or upto <= after:
            return None
        mine = self._rows("source_table = ? AND journal_epoch = ?", (table, epoch))
        if any(u.segment_kind == "payload_spill" and u.last_commit_seq > u.first_commit_seq
               for u in mine):
            return None
        nth = (f"SELECT commit_seq FROM {_J} WHERE table_name = ? AND commit_seq > ? "
               "AND commit_seq <= ? ORDER BY commit_seq LIMIT 1 OFFSET ?")
        head = self._src.execute(nth, (table, after, upto, 0)).fetchone()
        if head is None:
            return None
        first = int(head[0])
        for a, b in sorted((u.first_commit_seq, u.last_commit_seq) for u in mine):
            if b < first:
                continue
            if a <= first:
                return None
            upto = min(upto, a - 1)
            break
        if self._src.execute(nth, (table, after, upto, threshold)).fetchone() is None:
            return None  # not more than threshold rows
        end = self._src.execute(nth, (table, after, upto, max_rows - 1)).fetchone()
        last = int(end[0]) if end is not None else upto
        self._add(table, "payload_spill", epoch, first, last)
        log.warning("table %r: more than %d journal rows wait; commit_seq %d..%d go as a "
                    "payload_spill upload instead of MQTT batches", table, threshold, first,
                    last)
        return first, last

    def reseed(self, table: TableInfo, epoch: str) -> tuple[int, int] | None:
        """Journal every current row of ``table`` as an insert (one transaction) and
        reserve that range for a ``bootstrap_snapshot`` upload. Not while an earlier
        re-seed of the table is still to be built: that object reads the rows then."""
        if self._rows("source_table = ? AND journal_epoch = ? AND segment_kind = "
                      "'bootstrap_snapshot' AND status IN ('wanted', 'requested', 'granted')",
                      (table.name, epoch)):
            return None
        self._src.execute("BEGIN IMMEDIATE")
        try:
            top = int(self._src.execute(
                f"SELECT coalesce(max(commit_seq), 0) FROM {_J}").fetchone()[0])
            self._src.execute(snapshot_sql(table))
            new_top = int(self._src.execute(
                f"SELECT coalesce(max(commit_seq), 0) FROM {_J}").fetchone()[0])
            self._src.execute("COMMIT")
        except BaseException:
            self._src.execute("ROLLBACK")
            raise
        if new_top <= top:
            return None  # an empty table: nothing to re-seed
        self._add(table.name, "bootstrap_snapshot", epoch, top + 1, new_top)
        log.warning("table %r: re-seeding the cloud after a capture gap; %d row(s) go as a "
                    "bootstrap_snapshot upload", table.name, new_top - top)
        return top + 1, new_top

    # -- the steps

    def requested(self, key: int) -> None:
        with self._state.tx():
            self._db.execute("UPDATE uploads SET status='requested' WHERE upload_key=? AND "
                             "status='wanted'", (key,))

    def granted(self, doc: dict[str, Any]) -> bool:
        """A ``url_grant`` control: attach it to the oldest request it answers."""
        table, kind = doc.get("source_table"), doc.get("segment_kind")
        batch_id, url = doc.get("batch_id"), doc.get("presigned_url")
        if not all(isinstance(v, str) and v for v in (table, kind, batch_id, url)):
            log.warning("url_grant %s is malformed; ignored", doc.get("control_id"))
            return False
        with self._state.tx():
            if self._db.execute("SELECT 1 FROM uploads WHERE batch_id=?",
                                (batch_id,)).fetchone():
                return True
            n = self._db.execute(
                "UPDATE uploads SET status='granted', batch_id=?, presigned_url=?, "
                "expires_at=? WHERE upload_key = (SELECT min(upload_key) FROM uploads WHERE "
                "source_table=? AND segment_kind=? AND status IN ('requested', 'wanted'))",
                (batch_id, url, doc.get("presigned_url_expires_at"), table, kind)).rowcount
        if not n:
            log.warning("url_grant %s for %r (%s) answers no request of this agent; ignored",
                        doc.get("control_id"), table, kind)
        return n > 0

    def regrant(self, key: int, why: str) -> None:
        """The grant cannot be used (expired, refused): ask for a new URL."""
        log.warning("upload %d: %s; requesting a new URL", key, why)
        with self._state.tx():
            self._db.execute("UPDATE uploads SET status='wanted', batch_id=NULL, "
                             "presigned_url=NULL, expires_at=NULL WHERE upload_key=?", (key,))

    def uploaded(self, key: int) -> None:
        with self._state.tx():
            self._db.execute("UPDATE uploads SET status='uploaded' WHERE upload_key=?", (key,))
        self.path(key).unlink(missing_ok=True)

    def finalized(self, key: int) -> None:
        with self._state.tx():
            self._db.execute("UPDATE uploads SET status='finalized' WHERE upload_key=? AND "
                             "status='uploaded'", (key,))

    def path(self, key: int) -> Path:
        return self.spool / f"upload-{key}.jsonl.zst"

    def build(self, up: Upload, table: TableInfo, schema_hash: str, schema_json: str | None,
              read: RangeReader) -> Path:
        """Write the object of ``up`` to the spool (zstd JSON lines), streamed."""
        self.spool.mkdir(parents=True, exist_ok=True)
        path = self.path(up.upload_key)
        header: dict[str, Any] = {
            "format_version": SUPPORTED_FORMAT_VERSION, "capture_strategy": ROW_CAPTURE_STRATEGY,
            "source_table": up.source_table, "journal_epoch": up.journal_epoch,
            "schema_hash": schema_hash}
        if schema_json is not None:
            header["schema_columns"] = orjson.loads(schema_json)
        entries = shipped = 0
        tmp = path.with_suffix(".tmp")
        # One zstd frame per page of rows (the Rust extension's compressor: the agent needs
        # no zstd package of its own); a reader decompresses the frames one after another.
        with tmp.open("wb") as raw:
            lines = [orjson.dumps(header)]
            for page in read(table, up.first_commit_seq, up.last_commit_seq):
                for r in page:
                    entries += 1
                    if r.encoded is not None:
                        lines.append(r.encoded)
                        shipped += 1
                raw.write(compress_blob(b"\n".join(lines) + b"\n"))
                lines = []
            if lines:  # an empty range: the header alone
                raw.write(compress_blob(lines[0] + b"\n"))
        tmp.replace(path)
        with self._state.tx():
            self._db.execute("UPDATE uploads SET gone_rows=? WHERE upload_key=?",
                             (entries - shipped, up.upload_key))
        log.info("upload %d (%s of %r): %d row(s), %d bytes", up.upload_key, up.segment_kind,
                 up.source_table, shipped, path.stat().st_size)
        return path

    def settle(self, forget: Callable[[str, int, int], object]) -> list[Upload]:
        """Finish finalized uploads whose rows the cloud confirmed: only rows not in the
        object are left in the range, so the whole range goes. Returns those done."""
        done = []
        for up in self.with_status(UploadStatus.FINALIZED):
            # (the journal's top row always stays, so it is not counted)
            left = int(self._src.execute(
                f"SELECT count(*) FROM {_J} WHERE table_name = ? AND commit_seq >= ? "
                f"AND commit_seq <= ? AND commit_seq < (SELECT max(commit_seq) FROM {_J})",
                (up.source_table, up.first_commit_seq, up.last_commit_seq)).fetchone()[0])
            if left > (up.gone_rows or 0):
                continue
            forget(up.source_table, up.first_commit_seq, up.last_commit_seq)
            with self._state.tx():
                self._db.execute("DELETE FROM uploads WHERE upload_key=?", (up.upload_key,))
            log.info("upload %s (%s of %r) is committed by the cloud", up.batch_id,
                     up.segment_kind, up.source_table)
            done.append(up)
        return done

    def drop_epoch(self, table: str, epoch: str) -> None:
        """Uploads of an epoch that is no longer current can never complete."""
        with self._state.tx():
            self._db.execute("DELETE FROM uploads WHERE source_table=? AND journal_epoch<>?",
                             (table, epoch))
