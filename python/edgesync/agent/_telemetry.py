"""Telemetry tables → ``sync/telemetry/batch`` payloads, read with a cursor (no triggers).

Rows are read in ``(ts_column, key)`` order, where the key is the primary key (the
rowid for a table without one). The cursor is the largest timestamp sent. Each read
starts ``lookback`` before the cursor, and rows whose key was already sent are skipped
(state.db remembers the keys sent inside that window), so

* rows with equal timestamps on both sides of a batch boundary are all sent, once;
* a late row — committed after rows with newer timestamps were sent — is sent, once,
  as long as its timestamp is no older than ``cursor - lookback``.

Timestamps: ISO 8601 text (``2026-04-28T09:00:01Z``, ``2026-04-28 09:00:01.250``;
no offset means UTC) or Unix epoch numbers (seconds; values ≥ 1e11 are milliseconds).
They are sent as RFC 3339 UTC text with up to microsecond precision. A row whose
timestamp is NULL or unreadable cannot be placed and is logged and skipped.

``row_id`` is UUIDv7-shaped and deterministic: the row's timestamp (ms) in the time
field and the SHA-256 of (table, key) in the random bits, so a resend carries the same
id. ``fields`` holds ``include_columns`` (default: every column but ``ts_column``).
"""

from __future__ import annotations

import hashlib
import logging
import math
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from edgesync.agent._discovery import TelemetryTable
from edgesync.agent._telemetry_state import OutboxBatch, TelemetryState
from edgesync.agent._triggers import quote_ident
from edgesync.protocol import uuid7

__all__ = [
    "CAPTURE_STRATEGY",
    "TelemetryCapture",
    "format_ts",
    "parse_ts",
    "row_id",
]

CAPTURE_STRATEGY = "sqlite_telemetry_batch_v1"
MAX_BATCH_ROWS = 4096
MAX_BATCH_BYTES = 512 * 1024
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


class TelemetryCapture:
    """Reads new rows of telemetry tables and turns them into outbox batches."""

    def __init__(self, source: sqlite3.Connection, state: TelemetryState,
                 lookback_s: float) -> None:
        self._db = source
        self._state = state
        self._lookback_us = round(lookback_s * 1e6)
        self.tables: dict[str, TelemetryTable] = {}

    def register(self, table: TelemetryTable, *, from_start: bool) -> None:
        """Track ``table``. A new one starts at its newest row, or at its first when
        ``from_start`` (``snapshot_on_first_run``)."""
        self.tables[table.name] = table
        schema_hash, canonical = table.fingerprint()
        if self._state.table(table.name) is not None:
            self._state.ensure(table.name, schema_hash, canonical, start=None, seen=())
            return
        start: tuple[int, str] | None = None
        seen: list[tuple[str, int]] = []
        if not from_start:
            newest = self._db.execute(
                f"SELECT {quote_ident(table.ts_column)} FROM {quote_ident(table.name)} "
                f"WHERE {quote_ident(table.ts_column)} IS NOT NULL "
                f"ORDER BY 1 DESC LIMIT 1").fetchone()
            top = parse_ts(newest[0]) if newest else None
            if top is not None:
                # Rows already there are not sent; remember the window's keys so they
                # are not mistaken for late rows.
                seen = [(r.key, r.ts_us) for r in self._scan(table, top - self._lookback_us)]
                start = (top, "")
        self._state.ensure(table.name, schema_hash, canonical, start=start, seen=seen)

    def _scan(self, table: TelemetryTable, lo_us: int | None) -> Iterator[_Row]:
        """Rows with a timestamp ``>= lo_us`` (all when None), in (ts, key) order."""
        ts = quote_ident(table.ts_column)
        keys = [quote_ident(k) for k in table.key_columns] or ["rowid"]
        fields = [quote_ident(f) for f in table.field_columns]
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
        nk = len(keys)
        sql, args = select + where + order, params
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
            sql, args = select + page_where + order, tuple(rows[-1][:1 + nk])

    def next_batch(self, name: str) -> OutboxBatch | None:
        """Build, store in the outbox and return the next batch of ``name``; None when
        there is nothing new (or the table is paused)."""
        table = self.tables[name]
        st = self._state.table(name)
        if st is None or st.paused or st.schema_hash is None:
            return None
        lo = None if st.cursor_ts_us is None else st.cursor_ts_us - self._lookback_us
        sent = self._state.sent_keys(name)
        picked: list[tuple[int, str, bytes]] = []
        size = 0
        for row in self._scan(table, lo):
            if row.key in sent:
                continue
            ts_us, key = row.ts_us, row.key
            fields = {f: _json_value(v)
                      for f, v in zip(table.field_columns, row.values, strict=True)}
            enc = orjson.dumps({"ts": format_ts(ts_us), "row_id": row_id(name, key, ts_us),
                                "fields": fields})
            if size + len(enc) + 1 > MAX_BATCH_BYTES - 4096:  # 4 KiB for the envelope
                if not picked:
                    log.error("telemetry table %r: row %s alone is larger than a batch; "
                              "it is not sent", name, key)
                    continue
                break
            picked.append((ts_us, key, enc))
            size += len(enc) + 1
            if len(picked) == MAX_BATCH_ROWS:
                break
        if not picked:
            return None
        seq, batch_id = st.next_batch_seq, uuid7()
        head: dict[str, Any] = {
            "format_version": 1, "capture_strategy": CAPTURE_STRATEGY, "batch_id": batch_id,
            "batch_seq": seq, "source_table": name, "schema_hash": st.schema_hash}
        if not st.schema_sent and st.schema_json is not None:
            head["schema_columns"] = orjson.loads(st.schema_json)
        head["cursor_start_ts"] = format_ts(min(p[0] for p in picked))
        head["cursor_end_ts"] = format_ts(max(p[0] for p in picked))
        head["row_count"] = len(picked)
        payload = (orjson.dumps(head)[:-1] + b',"rows":[' + b",".join(p[2] for p in picked)
                   + b"]}")
        batch = OutboxBatch(name, seq, batch_id, payload, len(picked))
        last = max(picked)
        cursor = max((st.cursor_ts_us, st.cursor_key or ""), (last[0], last[1])) \
            if st.cursor_ts_us is not None else (last[0], last[1])
        self._state.save_batch(batch, cursor=cursor, with_schema="schema_columns" in head,
                               sent=[(k, t) for t, k, _ in picked],
                               keep_from_us=cursor[0] - self._lookback_us)
        return batch
