"""The agent's status: reported to the cloud, kept in ``state.db``, shown on the device.

``StatusReporter.report`` builds the ``request_kind: "status"`` document
(``edgesync.protocol._status``) at most every ``report_interval_s`` (a flush asks; no
task of its own) and keeps the last one in ``state.db`` (meta ``status_report``), so
``edgesync agent status`` reads it with nothing but the file: journal depth, age of
the oldest unconfirmed change, buffered bytes, paused tables, agent version.
``device_status`` is that command's reading (no cloud module involved).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import time
from pathlib import Path
from typing import IO, Any

import orjson

from edgesync._version import version
from edgesync.agent._lock import lock_path
from edgesync.agent._state import StateStore
from edgesync.agent.capture._freshness import SeenMarks
from edgesync.agent.capture._triggers import JOURNAL_TABLE, quote_ident
from edgesync.protocol import STATUS_REQUEST_KIND, AgentState, Pipeline

__all__ = ["REPORT_INTERVAL_S", "StatusReporter", "device_status", "will_payload",
           "write_status"]

REPORT_INTERVAL_S = 30.0
_META_KEY = "status_report"
_J = quote_ident(JOURNAL_TABLE)


def _doc(state: AgentState, **figures: Any) -> dict[str, Any]:
    return {"format_version": 1, "request_kind": STATUS_REQUEST_KIND, "state": state.value,
            "agent_version": version(), **figures}


def will_payload() -> bytes:
    """What the broker publishes for the agent when it vanishes (its MQTT will)."""
    return orjson.dumps(_doc(AgentState.OFFLINE))


class StatusReporter:
    """Builds the status report from the source's journal and ``state.db`` (DB thread)."""

    def __init__(self, source: sqlite3.Connection, state: StateStore, marks: SeenMarks, *,
                 interval_s: float = REPORT_INTERVAL_S) -> None:
        self._source = source
        self._state = state
        self._marks = marks
        self.interval_s = interval_s
        self._last = float("-inf")  # monotonic time of the last report

    def due(self) -> bool:
        return time.monotonic() - self._last >= self.interval_s

    def report(self, journal_bytes: int, *, connected: bool,
               state: AgentState = AgentState.RUNNING,
               usage: dict[str, int | None] | None = None,
               rows_tables: list[str] | None = None) -> bytes:
        """The report now (kept in ``state.db`` too); ``usage``: the wire figures."""
        self._last = time.monotonic()
        depth, oldest = self._source.execute(
            f"SELECT count(*), min(commit_seq) FROM {_J}").fetchone()
        seen = self._marks.first_seen_ms(int(oldest)) if oldest is not None else None
        age = max(0.0, time.time() - seen / 1000) if seen is not None else None
        db = self._state.db
        outbox_bytes, outbox_batches = db.execute(
            "SELECT coalesce(sum(length(payload)), 0), count(*) FROM telemetry_outbox"
        ).fetchone()
        published = db.execute("SELECT count(*) FROM published_batches").fetchone()[0]
        paused = [r[0] for r in db.execute(
            "SELECT source_table FROM tables WHERE paused UNION "
            "SELECT source_table FROM telemetry WHERE paused ORDER BY 1")]
        doc = _doc(state, report_interval_s=self.interval_s, journal_depth=int(depth),
                   oldest_unconfirmed_age_s=None if age is None else round(age, 3),
                   buffer_bytes=int(journal_bytes) + int(outbox_bytes),
                   unconfirmed_batches=int(published) + int(outbox_batches),
                   paused_tables=paused, **(usage or {}),
                   backlog_by_table=self._backlog(rows_tables or []))
        payload = orjson.dumps(doc)
        with self._state.tx():
            self._state.set_meta(_META_KEY, orjson.dumps(
                {**doc, "reported_at": time.time(), "connected": connected}).decode())
        return payload


    def _backlog(self, rows_tables: list[str]) -> dict[str, int]:
        """Rows waiting to be published, per table: journaled changes after the table's
        published cursor, and the rows of unpublished telemetry batches."""
        backlog: dict[str, int] = {}
        for name, cursor in self._state.db.execute(
                "SELECT source_table, last_published_commit_seq FROM tables"):
            if name in rows_tables:
                backlog[name] = int(self._source.execute(
                    f"SELECT count(*) FROM {_J} WHERE table_name=? AND commit_seq > ?",
                    (name, cursor)).fetchone()[0])
        for name, rows in self._state.db.execute(
                "SELECT source_table, coalesce(sum(row_count), 0) FROM telemetry_outbox "
                "WHERE published=0 GROUP BY source_table"):
            backlog[name] = int(rows)
        return {t: n for t, n in sorted(backlog.items()) if n}


def _running_pid(state_db: Path) -> int | None:
    """The pid of the agent holding ``state_db``'s lock (0: held, pid unknown), or None."""
    try:
        fd = os.open(lock_path(state_db), os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            return int(text) if text.isdigit() else 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def device_status(state_db: Path) -> dict[str, Any]:
    """``edgesync agent status``: what ``state.db`` says (read-only; the agent may run)."""
    if not state_db.is_file():
        return {"state_db": str(state_db), "running": False, "last_report": None,
                "tables": []}
    uri = f"file:{state_db.resolve()}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=5)) as db:
        row = db.execute("SELECT value FROM meta WHERE key=?", (_META_KEY,)).fetchone()
        last = orjson.loads(row[0]) if row is not None else None
        now = time.time()
        waiting = {t: (int(n), float(oldest)) for t, n, oldest in db.execute(
            "SELECT source_table, count(*), min(published_at) FROM published_batches "
            "GROUP BY source_table")}
        tables = []
        for name, paused, cursor in db.execute(
                "SELECT source_table, paused, last_published_commit_seq FROM tables "
                "ORDER BY source_table"):
            n, oldest = waiting.get(name, (0, now))
            tables.append({"table": name, "pipeline": Pipeline.ROWS, "paused": bool(paused),
                           "published_commit_seq": int(cursor), "unconfirmed_batches": n,
                           "oldest_unconfirmed_publish_age_s": round(now - oldest, 3)
                           if n else None})
        for name, paused, n, oldest in db.execute(
                "SELECT t.source_table, t.paused, count(o.batch_seq), min(o.published_at) "
                "FROM telemetry t LEFT JOIN telemetry_outbox o USING (source_table) "
                "GROUP BY t.source_table ORDER BY t.source_table"):
            tables.append({"table": name, "pipeline": Pipeline.TELEMETRY, "paused": bool(paused),
                           "published_commit_seq": None, "unconfirmed_batches": int(n),
                           "oldest_unconfirmed_publish_age_s": round(now - oldest, 3)
                           if oldest is not None else None})
    pid = _running_pid(state_db)
    if last is not None:
        last["age_s"] = round(now - float(last.get("reported_at", now)), 3)
    return {"state_db": str(state_db), "running": pid is not None, "pid": pid or None,
            "last_report": last, "tables": tables}


_REPORT_FIELDS = (("state", "state"), ("agent_version", "agent version"),
                  ("connected", "connected to the broker"),
                  ("journal_depth", "journal depth (changes held)"),
                  ("oldest_unconfirmed_age_s", "oldest unconfirmed change (s)"),
                  ("buffer_bytes", "buffer bytes"),
                  ("unconfirmed_batches", "unconfirmed batches"),
                  ("paused_tables", "paused tables"), ("age_s", "reported (s ago)"))


def write_status(status: dict[str, Any], out: IO[str]) -> None:
    """The table form of ``device_status``."""
    pid = f" (pid {status['pid']})" if status.get("pid") else ""
    out.write(f"state db      {status['state_db']}\n"
              f"agent         {'running' + pid if status['running'] else 'not running'}\n")
    last = status.get("last_report")
    if last is None:
        out.write("last report   none (the agent has not run with this state.db)\n")
    else:
        out.write("last report\n")
        for key, label in _REPORT_FIELDS:
            value = last.get(key)
            if isinstance(value, list):
                value = ", ".join(value) or "none"
            out.write(f"  {label:<32} {'-' if value is None else value}\n")
    if status["tables"]:
        out.write(f"\n{'table':<24} {'pipeline':<10} {'paused':<7} {'unconfirmed':<12} "
                  "oldest unconfirmed publish (s)\n")
        for t in status["tables"]:
            age = t["oldest_unconfirmed_publish_age_s"]
            out.write(f"{t['table']:<24} {t['pipeline']:<10} {'yes' if t['paused'] else 'no':<7} "
                      f"{t['unconfirmed_batches']:<12} {'-' if age is None else age}\n")
