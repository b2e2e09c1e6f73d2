"""Verification on the device: the digest a ``verify_table`` control asks for
(docs/protocol.md, "Table digest"; the cloud side is ``control._verify``).

The control names the columns (source names, in order) and the bucket prefix. The
digest is taken when the table is *drained* — every change journaled so far committed
by the cloud (no journal row of the table left but the kept top row, no pending batch,
no open upload) — or after ``MAX_WAIT_S`` anyway (then ``drained`` is false and the
cloud may see buckets differ that only lag). The table is read in one read transaction
together with the journal's top ``commit_seq`` (``as_of_commit_seq``): the digest
reflects exactly the changes up to it. The answer is a ``verify_digest`` report.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from typing import Any

import orjson

from edgesync import _core
from edgesync.agent._state import StateStore
from edgesync.agent.capture._discovery import TableInfo
from edgesync.agent.capture._triggers import JOURNAL_TABLE, quote_ident
from edgesync.protocol import DIGEST_VERSION, MAX_PREFIX, TableDigest, pk_json

__all__ = ["MAX_WAIT_S", "Verifications", "table_digest"]

log = logging.getLogger("edgesync.agent")

MAX_WAIT_S = 60.0
_J = quote_ident(JOURNAL_TABLE)


def table_digest(source: sqlite3.Connection, info: TableInfo, columns: list[dict[str, Any]],
                 prefix: int) -> dict[str, Any]:
    """The digest of ``info``'s rows over ``columns`` (``{"name", "text"}``), read in one
    read transaction with the journal's top commit_seq."""
    names = {c.name for c in info.columns}
    unknown = [c.get("name") for c in columns if c.get("name") not in names]
    if unknown:
        raise ValueError(f"column(s) {unknown} are not in table {info.name!r}")
    if not 1 <= prefix <= MAX_PREFIX:
        raise ValueError(f"prefix must be from 1 to {MAX_PREFIX}")
    key = [c.name for c in info.pk_columns]
    digest = TableDigest(prefix, frozenset(i for i, c in enumerate(columns) if c.get("text")))
    select = ", ".join(quote_ident(n) for n in [*key, *(str(c["name"]) for c in columns)])
    source.execute("BEGIN")
    try:
        as_of = int(source.execute(f"SELECT coalesce(max(commit_seq), 0) FROM {_J}")
                    .fetchone()[0])
        for row in source.execute(f"SELECT {select} FROM {quote_ident(info.name)}"):
            digest.add(_core.pk_hash(pk_json(key, row[:len(key)])), row[len(key):])
    finally:
        source.execute("COMMIT")
    return {"as_of_commit_seq": as_of, "rows": digest.rows, "buckets": digest.buckets()}


class Verifications:
    """Verification requests in ``state.db``; runs on the agent's database thread."""

    def __init__(self, source: sqlite3.Connection, state: StateStore) -> None:
        self._src, self._state, self._db = source, state, state.db

    def requested(self, doc: dict[str, Any]) -> None:
        job_id = str(doc.get("job_id") or "")
        if not job_id:
            log.warning("verify_table control %s has no job_id; ignored", doc.get("control_id"))
            return
        with self._state.tx():
            self._db.execute(
                "INSERT OR IGNORE INTO verifications (job_id, source_table, control, "
                "requested_at) VALUES (?, ?, ?, ?)",
                (job_id, str(doc["source_table"]), orjson.dumps(doc).decode(), time.time()))

    def _drained(self, table: str) -> bool:
        ts = self._state.table(table)
        if ts is None or self._state.pending(table) is not None:
            return False
        left = self._src.execute(
            f"SELECT count(*) FROM {_J} WHERE table_name = ? AND (commit_seq < "
            f"(SELECT max(commit_seq) FROM {_J}) OR commit_seq > ?)",
            (table, ts.last_published_commit_seq)).fetchone()[0]
        uploads = self._db.execute("SELECT count(*) FROM uploads WHERE source_table = ?",
                                   (table,)).fetchone()[0]
        return not left and not uploads

    def reports(self, tables: Callable[[str], TableInfo | None]) -> list[tuple[str, bytes]]:
        """``(job_id, verify_digest report)`` of requests whose digest is due now."""
        out = []
        now = time.time()
        for job_id, table, control, at, report in self._db.execute(
                "SELECT job_id, source_table, control, requested_at, report FROM "
                "verifications WHERE NOT sent ORDER BY rowid").fetchall():
            if report is None:
                drained = self._drained(table)
                if not drained and now - at < MAX_WAIT_S:
                    continue
                report = self._digest(orjson.loads(control), tables(table), drained)
                with self._state.tx():
                    self._db.execute("UPDATE verifications SET report=? WHERE job_id=?",
                                     (report, job_id))
            out.append((job_id, report.encode()))
        return out

    def _digest(self, doc: dict[str, Any], info: TableInfo | None, drained: bool) -> str:
        body: dict[str, Any] = {
            "format_version": 1, "request_kind": "verify_digest",
            "source_table": doc["source_table"], "job_id": doc["job_id"],
            "digest_version": DIGEST_VERSION, "drained": drained}
        ts = self._state.table(str(doc["source_table"]))
        if info is None or ts is None:
            body["error"] = f"table {doc['source_table']!r} is not captured by this agent"
        elif doc.get("digest_version") != DIGEST_VERSION:
            body["error"] = f"digest_version {doc.get('digest_version')!r} is not supported"
        else:
            try:
                cols = doc.get("columns")
                if not isinstance(cols, list) or not all(isinstance(c, dict) for c in cols):
                    raise ValueError("columns must be a list of {\"name\": ...}")
                body |= table_digest(self._src, info, cols, int(doc.get("prefix") or 0))
                body["journal_epoch"] = ts.journal_epoch
            except (ValueError, TypeError) as exc:
                body["error"] = str(exc)
        log.info("verify %s of %r: %s", doc["job_id"], doc["source_table"],
                 body.get("error") or f"{body.get('rows')} row(s) in "
                                      f"{len(body.get('buckets') or {})} bucket(s)")
        return orjson.dumps(body).decode()

    def sent(self, job_id: str) -> None:
        with self._state.tx():
            self._db.execute("UPDATE verifications SET sent=1 WHERE job_id=?", (job_id,))
            self._db.execute("DELETE FROM verifications WHERE sent AND rowid NOT IN "
                             "(SELECT rowid FROM verifications ORDER BY rowid DESC LIMIT 50)")
