"""Telemetry tables → ``sync/telemetry/batch`` payloads, read with a cursor (no triggers).

Rows are read in ``(ts_column, key)`` order, where the key is the primary key (the
rowid for a table without one). The cursor is the largest timestamp sent. Each read
starts ``lookback`` before the cursor, and rows whose key was already sent are skipped
(state.db remembers the keys sent inside that window), so

* rows with equal timestamps on both sides of a batch boundary are all sent, once;
* a late row — committed after rows with newer timestamps were sent — is sent, once,
  as long as its timestamp is no older than ``cursor - lookback``;
* for a table with a rowid (not ``WITHOUT ROWID``), every row inserted since the last
  read (rowid above the high-water mark kept in state.db) is sent whatever its
  timestamp, so a clock that jumps (forward then corrected, or set back by any amount)
  loses no row. The window then only reads rows at or below the mark.

Timestamps: ISO 8601 text (``2026-04-28T09:00:01Z``, ``2026-04-28 09:00:01.250``;
no offset means UTC) or Unix epoch numbers (seconds; values ≥ 1e11 are milliseconds).
They are sent as RFC 3339 UTC text with up to microsecond precision. A row whose
timestamp is NULL or unreadable cannot be placed and is logged and skipped.

``row_id`` is UUIDv7-shaped and deterministic: the row's timestamp (ms) in the time
field and the SHA-256 of (table, key) in the random bits, so a resend carries the same
id. ``fields`` holds ``ts_column`` (its value as stored) and ``include_columns``
(default: every column).
"""

from __future__ import annotations

import hashlib
import logging
import math
import sqlite3
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from edgesync._core import (
    MAX_BATCH_BYTES,
    MAX_BATCH_ROWS,
    SUPPORTED_FORMAT_VERSION,
    TELEMETRY_CAPTURE_STRATEGY,
)
from edgesync.agent.capture._discovery import TelemetryTable
from edgesync.agent.capture._telemetry_state import OutboxBatch, TelemetryState
from edgesync.agent.capture._triggers import quote_ident
from edgesync.protocol import uuid7

__all__ = [
    "TelemetryCapture",
    "format_ts",
    "parse_ts",
    "row_id",
    "rowid_alias",
]

_PAGE = 2048
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS_THRESHOLD = 1e11  # epoch numbers at or above this are milliseconds

log = logging.getLogger("edgesync.agent")


# --------------------------------------------------------------------------- values


def parse_ts(value: object) -> int | None:
    """Microseconds since the Unix epoch, or None when ``value`` is no timestamp."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        if not math.isfinite(value):
            return None
        return round(value * 1000) if abs(value) >= _MS_THRESHOLD else round(value * 1e6)
    if isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return (dt - _EPOCH) // timedelta(microseconds=1)
    return None


def format_ts(us: int) -> str:
    """RFC 3339 UTC: ``2026-04-28T09:00:01Z``, fraction only when not zero."""
    text = (_EPOCH + timedelta(microseconds=us)).strftime("%Y-%m-%dT%H:%M:%S")
    frac = us % 1_000_000
    return text + (f".{frac:06d}".rstrip("0") if frac else "") + "Z"


def _json_value(v: Any) -> Any:
    if isinstance(v, bytes):
        return {"$blob": v.hex().upper()}
    if isinstance(v, float) and not math.isfinite(v):
        return None  # JSON has no infinity; the cloud refuses 9e999 in telemetry
    return v


def row_key(values: Sequence[Any]) -> str:
    return orjson.dumps([_json_value(v) for v in values]).decode()


def row_id(table: str, key: str, ts_us: int) -> str:
    """UUIDv7 layout: 48-bit ms timestamp, version 7, variant 10, 74 bits of
    SHA-256(table NUL key). Same row, same id."""
    ms = min(max(ts_us // 1000, 0), (1 << 48) - 1)
    digest = int.from_bytes(hashlib.sha256(f"{table}\0{key}".encode()).digest()[:10], "big")
    rand = digest >> 6  # 74 bits
    value = ms << 80 | 0x7 << 76 | (rand >> 62) << 64 | 0b10 << 62 | (rand & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


def _raw_bound(sample: object, lo_us: int) -> object:
    """A value of the column's own kind that sorts at or before every timestamp
    ``>= lo_us`` (so the read can use an index on the column)."""
    if isinstance(sample, str):
        sep = sample[10] if len(sample) > 10 else "T"
        return (_EPOCH + timedelta(microseconds=lo_us)).strftime(f"%Y-%m-%d{sep}%H:%M:%S")
    if isinstance(sample, int | float) and abs(sample) >= _MS_THRESHOLD:
        return lo_us // 1000
    return lo_us // 1_000_000


# --------------------------------------------------------------------------- capture


@dataclass(frozen=True, slots=True)
class _Row:
    ts_us: int
    key: str
    values: tuple[Any, ...]  # field values, as SQLite returned them


def rowid_alias(db: sqlite3.Connection, table: str) -> str | None:
    """A name that reads ``table``'s rowid (``rowid``, ``_rowid_`` or ``oid``, whichever
    no column shadows); None for a ``WITHOUT ROWID`` table (or all three shadowed)."""
    cols = {str(r[1]).lower() for r in db.execute(
        f"SELECT * FROM pragma_table_xinfo({_sql_str(table)})")}
    for alias in ("rowid", "_rowid_", "oid"):
        if alias in cols:
            continue
        try:
            db.execute(f"SELECT {alias} FROM {quote_ident(table)} LIMIT 0").fetchall()
        except sqlite3.OperationalError:
            return None  # WITHOUT ROWID: none of the three exists
        return alias
    return None


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class TelemetryCapture:
    """Reads new rows of telemetry tables and turns them into outbox batches.

    Tables with a rowid also keep a rowid high-water mark: rows inserted since the last
    batch (rowid above the mark) are sent whatever their timestamp, so a clock that
    jumps forward and is corrected, or is set back by more than the look-back, loses
    nothing. The (ts, key) window only looks at rows at or below the mark (late rows
    that did not get a higher rowid), so the two reads never overlap.
    """

    def __init__(self, source: sqlite3.Connection, state: TelemetryState,
                 lookback_s: float) -> None:
        self._db = source
        self._state = state
        self._lookback_us = round(lookback_s * 1e6)
        self.tables: dict[str, TelemetryTable] = {}
        self._rowid: dict[str, str | None] = {}  # table -> rowid alias (None: no rowid)

    def _max_rowid(self, table: str, alias: str) -> int | None:
        row = self._db.execute(f"SELECT max({alias}) FROM {quote_ident(table)}").fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def register(self, table: TelemetryTable, *, from_start: bool) -> None:
        """Track ``table``. A new one starts at its newest row, or at its first when
        ``from_start`` (``snapshot_on_first_run``)."""
        self.tables[table.name] = table
        alias = self._rowid[table.name] = rowid_alias(self._db, table.name)
        schema_hash, canonical = table.fingerprint()
        if self._state.table(table.name) is not None:
            self._state.ensure(table.name, schema_hash, canonical, start=None, seen=())
            if alias is not None and not self._state.high_water(table.name)[0]:
                # State of an agent without rowid tracking: rows up to now are covered
                # the way that agent covered them (the look-back window).
                self._state.set_high_water(table.name, self._max_rowid(table.name, alias))
            return
        start: tuple[int, str] | None = None
        seen: list[tuple[str, int]] = []
        high_water: int | None = None
        own_tx = not self._db.in_transaction
        if own_tx:
            self._db.execute("BEGIN")  # one snapshot: cursor, window keys and rowid mark
        try:
            if not from_start:
                newest = self._db.execute(
                    f"SELECT {quote_ident(table.ts_column)} FROM {quote_ident(table.name)} "
                    f"WHERE {quote_ident(table.ts_column)} IS NOT NULL "
                    f"ORDER BY 1 DESC LIMIT 1").fetchone()
                top = parse_ts(newest[0]) if newest else None
                if top is not None:
                    # Rows already there are not sent; remember the window's keys so they
                    # are not mistaken for late rows.
                    seen = [(r.key, r.ts_us)
                            for r in self._scan(table, top - self._lookback_us)]
                    start = (top, "")
                if alias is not None:
                    high_water = self._max_rowid(table.name, alias)
        finally:
            if own_tx:
                self._db.execute("COMMIT")
        self._state.ensure(table.name, schema_hash, canonical, start=start, seen=seen,
                           high_water=(high_water,) if alias is not None else None)

    def _columns(self, table: TelemetryTable) -> tuple[str, list[str], list[str]]:
        ts = quote_ident(table.ts_column)
        alias = self._rowid.get(table.name) or "rowid"
        keys = [quote_ident(k) for k in table.key_columns] or [alias]
        return ts, keys, [quote_ident(f) for f in table.field_columns]

    def _scan(self, table: TelemetryTable, lo_us: int | None, *,
              upto_rowid: int | None = None) -> Iterator[_Row]:
        """Rows with a timestamp ``>= lo_us`` (all when None), in (ts, key) order; only
        rows with a rowid ``<= upto_rowid`` when given."""
        ts, keys, fields = self._columns(table)
        select = f"SELECT {', '.join([ts, *keys, *fields])} FROM {quote_ident(table.name)}"
        order = f" ORDER BY {', '.join([ts, *keys])} LIMIT {_PAGE}"
        where = f" WHERE {ts} IS NOT NULL"
        params: tuple[object, ...] = ()
        if lo_us is not None:
            sample = self._db.execute(f"SELECT {ts} FROM {quote_ident(table.name)} "
                                      f"WHERE {ts} IS NOT NULL ORDER BY 1 DESC LIMIT 1"
                                      ).fetchone()
            if sample is None:
                return
            where, params = f" WHERE {ts} >= ?", (_raw_bound(sample[0], lo_us),)
        page_where = f" WHERE ({', '.join([ts, *keys])}) > ({', '.join('?' * (1 + len(keys)))})"
        extra: tuple[object, ...] = ()
        if upto_rowid is not None:
            alias = self._rowid.get(table.name)
            assert alias is not None
            cond = f" AND {alias} <= ?"
            where, page_where, extra = where + cond, page_where + cond, (upto_rowid,)
        nk = len(keys)
        sql, args = select + where + order, params + extra
        while True:
            rows = self._db.execute(sql, args).fetchall()
            for r in rows:
                ts_us = parse_ts(r[0])
                if ts_us is None:
                    log.error("telemetry table %r: row %s has an unreadable timestamp %r in "
                              "%r; it is not sent", table.name, row_key(r[1:1 + nk]), r[0],
                              table.ts_column)
                    continue
                if lo_us is None or ts_us >= lo_us:
                    yield _Row(ts_us, row_key(r[1:1 + nk]), r[1 + nk:])
            if len(rows) < _PAGE:
                return
            sql, args = select + page_where + order, tuple(rows[-1][:1 + nk]) + extra

    def _scan_new(self, table: TelemetryTable, alias: str, after: int | None
                  ) -> Iterator[tuple[int, _Row | None]]:
        """(rowid, row) of the rows with a rowid ``> after`` (all when None), in rowid
        order; row is None when it has no usable timestamp (NULL, or unreadable:
        logged)."""
        ts, keys, fields = self._columns(table)
        select = (f"SELECT {', '.join([alias, ts, *keys, *fields])} "
                  f"FROM {quote_ident(table.name)}")
        order = f" ORDER BY {alias} LIMIT {_PAGE}"
        nk = len(keys)
        args: tuple[object, ...] = ()
        if after is None:
            sql = select + order
        else:
            sql, args = select + f" WHERE {alias} > ?" + order, (after,)
        while True:
            rows = self._db.execute(sql, args).fetchall()
            for r in rows:
                rid, raw = int(r[0]), r[1]
                ts_us = parse_ts(raw)
                if ts_us is None:
                    if raw is not None:
                        log.error("telemetry table %r: row %s has an unreadable timestamp %r "
                                  "in %r; it is not sent", table.name,
                                  row_key(r[2:2 + nk]), raw, table.ts_column)
                    yield rid, None
                    continue
                yield rid, _Row(ts_us, row_key(r[2:2 + nk]), r[2 + nk:])
            if len(rows) < _PAGE:
                return
            sql, args = select + f" WHERE {alias} > ?" + order, (rows[-1][0],)

    def _high_water(self, name: str) -> tuple[bool, int | None]:
        """(whether ``name`` is read by rowid too, its high-water mark). A mark above the
        table's largest rowid means the rowids went back (the table was emptied, or
        rebuilt): every row is looked at again (those whose key was sent inside the
        look-back window are still skipped)."""
        alias = self._rowid.get(name)
        if alias is None:
            return False, None
        tracked, hw = self._state.high_water(name)
        if not tracked:
            return False, None
        if hw is not None:
            top = self._max_rowid(name, alias)
            if top is None or top < hw:
                log.warning("telemetry table %r: its rowids went back (largest %s, sent up "
                            "to %d): the table was emptied or rebuilt; reading it from its "
                            "first row again", name, top, hw)
                hw = None
                self._state.set_high_water(name, None)
        return True, hw

    def next_batch(self, name: str) -> OutboxBatch | None:
        """Build, store in the outbox and return the next batch of ``name``; None when
        there is nothing new (or the table is paused)."""
        table = self.tables[name]
        st = self._state.table(name)
        if st is None or st.paused or st.schema_hash is None:
            return None
        tracked, hw = self._high_water(name)
        lo = None if st.cursor_ts_us is None else st.cursor_ts_us - self._lookback_us
        sent = self._state.sent(name)
        picked: list[tuple[int, str, bytes]] = []
        taken: set[str] = set()
        size = 0

        def offer(row: _Row) -> str:
            """'added', 'full' (the batch is full: not added) or 'dropped'."""
            nonlocal size
            ts_us, key = row.ts_us, row.key
            fields = {f: _json_value(v)
                      for f, v in zip(table.field_columns, row.values, strict=True)}
            enc = orjson.dumps({"ts": format_ts(ts_us), "row_id": row_id(name, key, ts_us),
                                "fields": fields})
            if size + len(enc) + 1 > MAX_BATCH_BYTES - 4096:  # 4 KiB for the envelope
                if not picked:
                    log.error("telemetry table %r: row %s alone is larger than a batch; "
                              "it is not sent", name, key)
                    return "dropped"
                return "full"
            picked.append((ts_us, key, enc))
            taken.add(key)
            size += len(enc) + 1
            return "full" if len(picked) == MAX_BATCH_ROWS else "added"

        full = False
        # 1. the (ts, key) window: late rows (at or below the rowid mark when tracked)
        if not tracked or hw is not None:
            for row in self._scan(table, lo, upto_rowid=hw if tracked else None):
                if row.key in sent or row.key in taken:
                    continue
                if offer(row) == "full":
                    full = True
                    break
        # 2. rows inserted since the last batch, whatever their timestamp
        new_hw = hw
        if tracked and not full:
            alias = self._rowid[name]
            assert alias is not None
            for rid, got in self._scan_new(table, alias, hw):
                # A new rowid whose key was sent with the same timestamp is that row
                # again (REPLACE, a rebuilt table); with another one it is a new reading
                # under a reused key (an emptied table).
                if got is None or sent.get(got.key) == got.ts_us or got.key in taken:
                    new_hw = rid
                    continue
                res = offer(got)
                if res == "full" and got.key not in taken:
                    break  # did not fit: the next batch starts with it
                new_hw = rid
                if res == "full":
                    break
        if not picked:
            if tracked and new_hw != hw:
                self._state.set_high_water(name, new_hw)  # only rows that cannot be sent
            return None
        picked.sort(key=lambda p: (p[0], p[1]))
        seq, batch_id = st.next_batch_seq, uuid7()
        head: dict[str, Any] = {
            "format_version": SUPPORTED_FORMAT_VERSION,
            "capture_strategy": TELEMETRY_CAPTURE_STRATEGY, "batch_id": batch_id,
            "batch_seq": seq, "source_table": name, "schema_hash": st.schema_hash}
        if not st.schema_sent and st.schema_json is not None:
            head["schema_columns"] = orjson.loads(st.schema_json)
        head["cursor_start_ts"] = format_ts(picked[0][0])
        head["cursor_end_ts"] = format_ts(max(p[0] for p in picked))
        head["row_count"] = len(picked)
        # The read that found these rows is when the agent first saw them (docs/protocol.md).
        head["first_seen_at_ms"] = int(time.time() * 1000)
        payload = (orjson.dumps(head)[:-1] + b',"rows":[' + b",".join(p[2] for p in picked)
                   + b"]}")
        batch = OutboxBatch(name, seq, batch_id, payload, len(picked))
        last = picked[-1]
        cursor = max((st.cursor_ts_us, st.cursor_key or ""), (last[0], last[1])) \
            if st.cursor_ts_us is not None else (last[0], last[1])
        self._state.save_batch(batch, cursor=cursor, with_schema="schema_columns" in head,
                               sent=[(k, t) for t, k, _ in picked],
                               keep_from_us=cursor[0] - self._lookback_us,
                               high_water=(new_hw,) if tracked else None)
        return batch
