"""``state_write`` controls: the cloud writes rows of a ``cloud_authoritative`` table.

    {"control_kind": "state_write", "source_table": "t",
     "rows": [{"pk": {"id": 1}, "values": {"mode": "eco"}, "cloud_version": 7}]}

The rows are upserted into the application's table by primary key in one ``BEGIN
IMMEDIATE`` transaction. The triggers fire as for any write; the journal rows they
add for the table (everything above the journal's top before the transaction) are
deleted before the commit, so the cloud's own write never travels back as a device
change. The journal's top row from before stays, so ``commit_seq`` is never reused.

Each row's ``cloud_version`` is kept in ``state.db`` per (table, key); every later row
operation the agent uploads for that key carries it as ``lkcv`` (last known cloud
version), so the cloud can tell a device edit made against an older version of its row.
Values and keys use the row JSON encoding (BLOB = ``{"$blob": "<hex>"}``).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from edgesync.agent._state import StateStore
from edgesync.agent.capture._discovery import TableInfo
from edgesync.agent.capture._triggers import JOURNAL_TABLE, quote_ident

__all__ = ["CloudVersions", "apply_state_write", "key_text"]

log = logging.getLogger("edgesync.agent")

_J = quote_ident(JOURNAL_TABLE)


def _norm(v: Any) -> Any:
    if isinstance(v, dict) and isinstance(v.get("$blob"), str):
        return {"$blob": v["$blob"].upper()}
    return v


def key_text(pk: Mapping[str, Any], pk_names: Sequence[str]) -> str | None:
    """The stored form of a key: its values in primary-key order (blob hex upper-cased);
    None when ``pk`` does not name exactly these columns."""
    if set(pk) != set(pk_names):
        return None
    return orjson.dumps([_norm(pk[n]) for n in pk_names]).decode()


def _sql_value(v: Any) -> Any:
    if isinstance(v, dict):
        blob = v.get("$blob")
        if not isinstance(blob, str):
            raise ValueError("an object value must be {\"$blob\": \"<hex>\"}")
        return bytes.fromhex(blob)
    if isinstance(v, list):
        raise ValueError("a list is not a column value")
    return v


class CloudVersions:
    """The ``cloud_version`` last received per (table, key), in ``state.db``."""

    def __init__(self, state: StateStore) -> None:
        self._state = state
        self._db = state.db
        self._tables = {r[0] for r in self._db.execute(
            "SELECT DISTINCT source_table FROM cloud_versions")}

    def any_for(self, table: str) -> bool:
        return table in self._tables

    def get(self, table: str, keys: Sequence[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for i in range(0, len(keys), 500):
            part = keys[i:i + 500]
            out.update(self._db.execute(
                f"SELECT pk, cloud_version FROM cloud_versions WHERE source_table=? AND "
                f"pk IN ({','.join('?' * len(part))})", (table, *part)).fetchall())
        return out

    def forget(self, table: str) -> None:
        """The lineage is gone: the versions were the old lineage's (a new one counts
        from 0 again)."""
        with self._state.tx():
            self._db.execute("DELETE FROM cloud_versions WHERE source_table=?", (table,))
        self._tables.discard(table)

    def save(self, table: str, versions: Mapping[str, int]) -> None:
        with self._state.tx():
            self._db.executemany(
                "INSERT INTO cloud_versions VALUES (?, ?, ?) ON CONFLICT DO UPDATE SET "
                "cloud_version = max(cloud_version, excluded.cloud_version)",
                [(table, k, v) for k, v in versions.items()])
        self._tables.add(table)

    def add_lkcv(self, table: TableInfo, encoded: Sequence[bytes]) -> list[bytes]:
        """Batch rows (``{"commit_seq",…,"row":…}`` JSON) with ``"lkcv"`` appended to
        those whose key has a known cloud version."""
        if not self.any_for(table.name):
            return list(encoded)
        names = [c.name for c in table.pk_columns]
        keys = [key_text(orjson.loads(e)["pk"], names) or "" for e in encoded]
        known = self.get(table.name, sorted(set(keys)))
        return [e[:-1] + b',"lkcv":%d}' % known[k] if k in known else e
                for e, k in zip(encoded, keys, strict=True)]


def apply_state_write(doc: dict[str, Any], source: sqlite3.Connection,
                      table: TableInfo | None, versions: CloudVersions) -> int:
    """Apply a ``state_write`` control; returns how many rows were written."""
    cid, name, rows = doc.get("control_id"), doc.get("source_table"), doc.get("rows")
    if table is None:
        log.warning("state_write %s names table %r, which this agent does not capture as "
                    "rows; ignored", cid, name)
        return 0
    pk_names = [c.name for c in table.pk_columns]
    columns = {c.name for c in table.columns}
    planned: list[tuple[dict[str, Any], str, int]] = []
    for i, row in enumerate(rows if isinstance(rows, list) else [None]):
        pk = row.get("pk") if isinstance(row, dict) else None
        values = row.get("values", {}) if isinstance(row, dict) else None
        version = row.get("cloud_version") if isinstance(row, dict) else None
        key = key_text(pk, pk_names) if isinstance(pk, dict) else None
        if key is None or not isinstance(values, dict) or not isinstance(version, int) \
                or not set(values) <= columns:
            log.warning("state_write %s: row %d is malformed (needs pk %s, values of known "
                        "columns and cloud_version); the control is ignored", cid, i, pk_names)
            return 0
        assert isinstance(pk, dict)
        planned.append(({**values, **pk}, key, version))
    try:
        _upsert(source, table, pk_names, [p[0] for p in planned])
    except (ValueError, sqlite3.Error) as exc:
        log.error("state_write %s for %r could not be applied: %s", cid, name, exc)
        return 0
    versions.save(table.name, {key: version for _, key, version in planned})
    log.info("state_write %s: %d row(s) of %r written by the cloud", cid, len(planned), name)
    return len(planned)


def _upsert(db: sqlite3.Connection, table: TableInfo, pk_names: list[str],
            rows: list[dict[str, Any]]) -> None:
    t = quote_ident(table.name)
    db.execute("BEGIN IMMEDIATE")
    try:
        top = db.execute(f"SELECT coalesce(max(commit_seq), 0) FROM {_J}").fetchone()[0]
        for row in rows:
            cols = list(row)
            names = ", ".join(quote_ident(c) for c in cols)
            updates = [c for c in cols if c not in pk_names]
            conflict = (f" ON CONFLICT ({', '.join(quote_ident(c) for c in pk_names)}) DO "
                        + ("UPDATE SET " + ", ".join(f"{quote_ident(c)} = excluded."
                                                     f"{quote_ident(c)}" for c in updates)
                           if updates else "NOTHING"))
            db.execute(f"INSERT INTO {t} ({names}) VALUES ({', '.join('?' * len(cols))})"
                       + conflict, [_sql_value(row[c]) for c in cols])
        # The cloud's own write is no device change: drop what the triggers journaled.
        db.execute(f"DELETE FROM {_J} WHERE table_name = ? AND commit_seq > ?",
                   (table.name, top))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
