"""Re-snapshot on demand, on the device (docs/recovery.md).

A ``resnapshot`` control names a table and a structured filter (``protocol.parse_filter``:
never SQL text). The job is kept in ``state.db`` and moved on at every flush
(``Resnapshots.step``): the selected rows are read in primary-key order, ``CHUNK_ROWS``
at a time, each chunk in its own short ``BEGIN IMMEDIATE`` transaction that journals
the chunk's keys again as ``insert`` changes — so the application keeps writing
between chunks and capture goes on. Each chunk's journal range (contiguous: the
transaction holds the write lock) is reserved as a ``bootstrap_snapshot`` upload
(``Uploads.reserve``) and travels over HTTP like a re-seed; at most ``MAX_OPEN`` of a
job's uploads are open at once.

Newer wins on its own: a chunk's changes get ``commit_seq`` values higher than any
change before the chunk was read, and any later change of those rows is journaled with a
higher one still, so a re-sent row never overwrites a newer change in the cloud. A
hash-bucket filter is applied in Python after the SQL filter (the key's
``_edge_pk_hash`` is not computable in SQLite).

The cursor (the last key read) is stored after each chunk, so a restart goes on where it
stopped (a crash between the journal commit and the cursor update journals that chunk
twice: harmless, newer wins). The device reports ``resnapshot_status`` (running with
rows and chunks so far, then completed once every upload of the job is committed by the
cloud, or failed with the reason).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from typing import Any

import orjson

from edgesync import _core
from edgesync.agent._state import StateStore
from edgesync.agent.capture._discovery import TableInfo
from edgesync.agent.capture._triggers import JOURNAL_TABLE, key_column, quote_ident
from edgesync.agent.jobs._uploads import Uploads
from edgesync.errors import InvalidRequestError
from edgesync.protocol import FilterOp, SnapshotFilter, parse_filter, pk_json

__all__ = ["CHUNK_ROWS", "MAX_OPEN", "Resnapshots", "where_sql"]

log = logging.getLogger("edgesync.agent")

CHUNK_ROWS = 20_000
MAX_OPEN = 3
_J = quote_ident(JOURNAL_TABLE)
_KIND = "bootstrap_snapshot"
_SQL_OP = {FilterOp.EQ: "=", FilterOp.NE: "<>", FilterOp.LT: "<", FilterOp.LE: "<=",
           FilterOp.GT: ">", FilterOp.GE: ">="}


def _value(v: Any) -> Any:
    return bytes.fromhex(v["$blob"]) if isinstance(v, dict) else v


def _tagged(v: Any) -> Any:
    return {"$blob": v.hex()} if isinstance(v, bytes) else v


def where_sql(flt: SnapshotFilter, table: TableInfo, after: list[Any] | None = None
              ) -> tuple[str, list[Any]]:
    """``(WHERE clause, bound values)`` of a filter's terms and key range (and the
    cursor ``after``): identifiers are the table's own columns, quoted; values bound."""
    names = {c.name for c in table.columns}
    key = [c.name for c in table.pk_columns]
    parse_filter(flt.doc(), columns=names, key=key)  # a name the table lacks is refused
    parts: list[str] = []
    args: list[Any] = []
    for t in flt.terms:
        col = quote_ident(t.column)
        if t.op is FilterOp.IS_NULL:
            parts.append(f"{col} IS NULL")
        elif t.op is FilterOp.NOT_NULL:
            parts.append(f"{col} IS NOT NULL")
        elif t.op is FilterOp.IN:
            parts.append(f"{col} IN ({', '.join('?' for _ in t.value)})")
            args += [_value(v) for v in t.value]
        else:
            parts.append(f"{col} {_SQL_OP[t.op]} ?")
            args.append(_value(t.value))
    row = "(" + ", ".join(quote_ident(k) for k in key) + ")"
    marks = "(" + ", ".join("?" for _ in key) + ")"
    bounds = [(">=", flt.key_range.start if flt.key_range else None),
              ("<", flt.key_range.end if flt.key_range else None)]
    for op, side in bounds:
        if side:
            parts.append(f"{row} {op} {marks}")
            args += [_value(side[k]) for k in key]
    if after is not None:
        parts.append(f"{row} > {marks}")
        args += after
    return (" AND ".join(parts) or "1"), args


class Resnapshots:
    """Re-snapshot jobs in ``state.db``; runs on the agent's database thread."""

    def __init__(self, source: sqlite3.Connection, state: StateStore, uploads: Uploads, *,
                 chunk_rows: int | None = None, max_open: int | None = None) -> None:
        self._src, self._state, self._db, self._uploads = source, state, state.db, uploads
        self._chunk = chunk_rows or CHUNK_ROWS
        self._max_open = max_open or MAX_OPEN

    def requested(self, doc: dict[str, Any], info: TableInfo | None) -> None:
        """A ``resnapshot`` control (executing it twice changes nothing)."""
        job_id, table = str(doc.get("job_id") or ""), str(doc["source_table"])
        error = None
        if not job_id:
            log.warning("resnapshot control %s has no job_id; ignored", doc.get("control_id"))
            return
        try:
            if info is None:
                raise InvalidRequestError("source_table", f"table {table!r} is not captured "
                                          "by this agent as a rows table")
            where_sql(parse_filter(doc.get("filter")), info)
        except InvalidRequestError as exc:
            error = str(exc)
        with self._state.tx():
            self._db.execute(
                "INSERT OR IGNORE INTO resnapshots (job_id, source_table, filter, status, "
                "reading, error) VALUES (?, ?, ?, ?, ?, ?)",
                (job_id, table, orjson.dumps(doc.get("filter") or {}).decode(),
                 "failed" if error else "running", 0 if error else 1, error))
        log.info("resnapshot %s of %r requested%s", job_id, table,
                 f"; refused: {error}" if error else "")

    def _jobs(self, where: str) -> list[dict[str, Any]]:
        cur = self._db.execute(
            "SELECT job_id, source_table, filter, status, reading, cursor, journal_epoch, "
            "first_commit_seq, last_commit_seq, rows, chunks, error, reported "
            f"FROM resnapshots WHERE {where} ORDER BY rowid")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur]

    def _open_uploads(self, job: dict[str, Any]) -> int:
        if job["first_commit_seq"] is None:
            return 0
        return int(self._db.execute(
            "SELECT count(*) FROM uploads WHERE source_table = ? AND segment_kind = ? "
            "AND first_commit_seq >= ? AND last_commit_seq <= ?",
            (job["source_table"], _KIND, job["first_commit_seq"],
             job["last_commit_seq"])).fetchone()[0])

    def step(self, tables: Callable[[str], TableInfo | None]) -> None:
        """Read the next chunks of running jobs; complete those whose uploads are all
        committed. One job at a time per table, oldest first."""
        busy: set[str] = set()
        for job in self._jobs("status = 'running'"):
            table = job["source_table"]
            if table in busy:
                continue
            busy.add(table)
            info, ts = tables(table), self._state.table(table)
            if info is None or ts is None or ts.schema_hash is None:
                continue  # not captured (yet): wait
            if job["journal_epoch"] not in (None, ts.journal_epoch):
                self._finish(job["job_id"], "failed", "the journal was rebuilt (a new journal "
                             "epoch) while the re-snapshot ran; request it again")
                continue
            while job["reading"] and self._open_uploads(job) < self._max_open:
                job = self._read_chunk(job, info, ts.journal_epoch)
            if not job["reading"] and not self._open_uploads(job):
                self._finish(job["job_id"], "completed", None)

    def _read_chunk(self, job: dict[str, Any], info: TableInfo, epoch: str) -> dict[str, Any]:
        flt = parse_filter(orjson.loads(job["filter"]))
        after = orjson.loads(job["cursor"]) if job["cursor"] else None
        where, args = where_sql(flt, info, [_value(v) for v in after] if after else None)
        key = [c.name for c in info.pk_columns]
        order = ", ".join(quote_ident(k) for k in key)
        kcols = ", ".join(key_column(i) for i in range(len(key)))
        self._src.execute("BEGIN IMMEDIATE")
        try:
            rows = self._src.execute(
                f"SELECT {order} FROM {quote_ident(info.name)} WHERE {where} "
                f"ORDER BY {order} LIMIT {int(self._chunk)}", args).fetchall()
            keep = rows if not flt.buckets else [
                r for r in rows
                if _core.pk_hash(pk_json(key, r))[:flt.prefix] in flt.buckets]
            top = int(self._src.execute(
                f"SELECT coalesce(max(commit_seq), 0) FROM {_J}").fetchone()[0])
            self._src.executemany(
                f"INSERT INTO {_J} (table_name, op, {kcols}) VALUES (?, 'insert', "
                + ", ".join("?" for _ in key) + ")", [(info.name, *r) for r in keep])
            self._src.execute("COMMIT")
        except BaseException:
            self._src.execute("ROLLBACK")
            raise
        first, last = top + 1, top + len(keep)
        if keep:
            self._uploads.reserve(info.name, _KIND, epoch, first, last)
        job = {**job, "reading": int(len(rows) == self._chunk), "journal_epoch": epoch,
               "cursor": orjson.dumps([_tagged(v) for v in rows[-1]]).decode() if rows
               else job["cursor"], "rows": job["rows"] + len(keep),
               "chunks": job["chunks"] + (1 if keep else 0),
               "first_commit_seq": job["first_commit_seq"] or (first if keep else None),
               "last_commit_seq": last if keep else job["last_commit_seq"]}
        with self._state.tx():
            self._db.execute(
                "UPDATE resnapshots SET reading=?, cursor=?, journal_epoch=?, rows=?, chunks=?, "
                "first_commit_seq=?, last_commit_seq=? WHERE job_id=?",
                (job["reading"], job["cursor"], epoch, job["rows"], job["chunks"],
                 job["first_commit_seq"], job["last_commit_seq"], job["job_id"]))
        log.info("resnapshot %s of %r: %d row(s) journaled (commit_seq %d..%d), %d so far",
                 job["job_id"], info.name, len(keep), first, last, job["rows"])
        return job

    def _finish(self, job_id: str, status: str, error: str | None) -> None:
        with self._state.tx():
            self._db.execute("UPDATE resnapshots SET status=?, reading=0, error=? "
                             "WHERE job_id=?", (status, error, job_id))
        log.info("resnapshot %s %s%s", job_id, status, f": {error}" if error else "")

    def reports(self) -> list[tuple[str, bytes]]:
        """``(job_id, resnapshot_status report)`` of jobs whose state changed since the
        last report published."""
        out = []
        for job in self._jobs("1"):
            mark = f"{job['status']}:{job['rows']}:{job['chunks']}"
            if mark == job["reported"]:
                continue
            out.append((job["job_id"], orjson.dumps({
                "format_version": 1, "request_kind": "resnapshot_status",
                "source_table": job["source_table"], "job_id": job["job_id"],
                "status": job["status"], "rows": job["rows"], "chunks": job["chunks"],
                "journal_epoch": job["journal_epoch"],
                "first_commit_seq": job["first_commit_seq"],
                "last_commit_seq": job["last_commit_seq"], "error": job["error"]})))
        return out

    def reported(self, job_id: str, report: bytes) -> None:
        doc = orjson.loads(report)
        with self._state.tx():
            self._db.execute("UPDATE resnapshots SET reported=? WHERE job_id=?",
                             (f"{doc['status']}:{doc['rows']}:{doc['chunks']}", job_id))
            # finished jobs are kept a while for the record; the oldest go
            self._db.execute(
                "DELETE FROM resnapshots WHERE status <> 'running' AND reported IS NOT NULL "
                "AND rowid NOT IN (SELECT rowid FROM resnapshots ORDER BY rowid DESC LIMIT 50)")
