"""``edge_state_*`` tables: provisioning and order-independent upserts.

Every row keeps the ``(journal_epoch, commit_seq)`` of the change that wrote it;
a change is applied only when it is newer, and deletes leave a tombstone. So
redelivery, replay after live writes, and batches handled out of order by
parallel workers all converge on the device's latest state without a lock.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import uuid
from typing import Literal

from edgesync._core import RowBatch
from edgesync.materialize._data_points import MappedColumn, state_values_sql, temp_columns_ddl
from edgesync.materialize._ddl import lock_ddl
from edgesync.materialize._identifiers import quote_ident
from edgesync.materialize._ts_target import TsTarget
from edgesync.materialize._types import MirrorColumn, copy_format, copy_stream
from edgesync.store import CommitTail, Conn

__all__ = ["MirrorColumn", "StateTarget"]

_temp_names = itertools.count()


def _newest(source: str, keys_unique: bool) -> str:
    """The rows of ``source`` that can win: the newest change of each (device, key). A
    single batch whose keys are all distinct (the Rust decoder tells) needs no sort."""
    if keys_unique:
        return source
    return (f"(SELECT DISTINCT ON (_edge_device, _edge_pk_hash) * FROM {source} "
            "ORDER BY _edge_device, _edge_pk_hash, _edge_epoch DESC, _edge_seq DESC)")


class _Shape:
    """What follows from a target's table and columns: worked out once per shape and
    shared by every lineage of it. A StateTarget is built for each lineage of each
    group, and the staging layout, COPY columns and statement texts were worked out
    again each time (a few percent of the worker's CPU at half load, py-spy)."""

    def __init__(self, table: str, columns: tuple[MirrorColumn, ...],
                 mapped: tuple[MappedColumn, ...]) -> None:
        # ``columns`` come in their own order (``_by_target``), never in the order their
        # bindings were read in: one temp table per layout and connection, however many
        # lineages (devices) share the layout.
        self.ordered = list(columns)
        self.copy_columns = ([(c.source, c.pg_type) for c in self.ordered]
                             + [(m.source, m.pg_type) for m in mapped])
        cols_ddl = "".join(f", {quote_ident(c.target)} {c.pg_type}" for c in self.ordered)
        self.layout = ("(_edge_device uuid, _edge_pk_hash text, _edge_epoch uuid, "
                       f"_edge_seq bigint, _edge_deleted boolean{cols_ddl}"
                       f"{temp_columns_ddl(list(mapped))})")
        # One staging table per column layout and connection (see ``write_group``).
        self.staging = "_edge_in_" + hashlib.sha256(self.layout.encode()).hexdigest()[:16]
        self.copy_format = copy_format(self.copy_columns)
        self.telemetry = TsTarget(table, list(columns), list(mapped))
        # write_group's statement, by whether the keys are unique.
        self.group_upserts: dict[bool, str] = {}


def _by_target(c: MirrorColumn) -> tuple[str, str, str, str]:
    return (c.target, c.pg_type, c.source, c.stored_type or "")


@functools.lru_cache(maxsize=4096)
def _shape(table: str, columns: tuple[MirrorColumn, ...],
           mapped: tuple[MappedColumn, ...]) -> _Shape:
    return _Shape(table, columns, mapped)


class StateTarget:
    def __init__(self, table: str, columns: list[MirrorColumn], *,
                 cloud_authoritative: bool = False,
                 mapped: list[MappedColumn] | None = None) -> None:
        self.table = table
        self.columns = columns
        # Columns approved with map / auto_create_and_map: device data point values.
        self.mapped = list(mapped or [])
        # Cloud-authoritative tables also weigh each device change's lkcv against the
        # cloud's version of the row (see docs/protocol.md, "Write-back").
        self.cloud_authoritative = cloud_authoritative
        self.conflicts: list[str] = []
        # Bindings are read in id order, a different one for each lineage: in the
        # columns' own order, lineages of one table and columns share one shape (and
        # one telemetry COPY, ``write_batches``).
        self._shape = _shape(table, tuple(sorted(columns, key=_by_target)), tuple(self.mapped))

    async def provision_cloud_authority(self, conn: Conn) -> None:
        await lock_ddl(conn, self.table)
        q = quote_ident(self.table)
        await conn.execute(f"ALTER TABLE {q} ADD COLUMN IF NOT EXISTS _edge_cloud_version bigint, "
                           "ADD COLUMN IF NOT EXISTS _edge_lkcv bigint")

    async def forget_cloud_versions(self, conn: Conn, device_id: uuid.UUID) -> int:
        """Drop the cloud's claim on a device's rows (``_edge_cloud_version``,
        ``_edge_lkcv`` back to NULL) when its table turns device-authoritative; returns
        how many rows had one. Needs ``provision_cloud_authority`` to have run."""
        status: str = await conn.execute(
            f"UPDATE {quote_ident(self.table)} SET _edge_cloud_version = NULL, "
            "_edge_lkcv = NULL WHERE device_id = $1 "
            "AND (_edge_cloud_version IS NOT NULL OR _edge_lkcv IS NOT NULL)", device_id)
        return int(status.rsplit(" ", 1)[-1])

    async def provision(self, conn: Conn) -> None:
        """Create the table, or add the columns a newer schema brought (idempotent, safe
        against concurrent callers: ``_ddl``)."""
        await lock_ddl(conn, self.table)
        q = quote_ident(self.table)
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {q} ("
            " device_id uuid NOT NULL,"
            # Hex digits ordered byte by byte: the primary key's comparisons are then
            # memcmp, not the database's collation (en_US.UTF-8: 15 % off each insert
            # into a big key, docs/production.md). Equal either way: a table made
            # before this, in the database's collation, is written the same.
            ' _edge_pk_hash text COLLATE "C" NOT NULL,'
            " _edge_journal_epoch uuid NOT NULL,"
            " _edge_commit_seq bigint NOT NULL,"
            " _edge_deleted boolean NOT NULL DEFAULT false,"
            " _edge_synced_at timestamptz NOT NULL DEFAULT now(),"
            " PRIMARY KEY (device_id, _edge_pk_hash))"
            # Room on each page for the new version of an updated row: an update that
            # changes no key then stays on its page (HOT) and skips the index.
            " WITH (fillfactor = 80)"
        )
        for col in self.columns:
            await conn.execute(
                f"ALTER TABLE {q} ADD COLUMN IF NOT EXISTS {quote_ident(col.target)} {col.pg_type}"
            )

    @property
    def plain(self) -> bool:
        """Only mirrored columns, device-authoritative: batches of many devices can then
        share one COPY and one upsert (``write_group``)."""
        return not self.mapped and not self.cloud_authoritative

    # A target's columns never change once it is built (a new schema builds a new one).
    def _copy_columns(self) -> list[tuple[str, str]]:
        return self._shape.copy_columns

    @property
    def layout(self) -> str:
        """The staging table's columns: targets with equal layouts can share a COPY."""
        return self._shape.layout

    @property
    def telemetry(self) -> TsTarget:
        """The telemetry target of the same table and bindings."""
        return self._shape.telemetry

    @property
    def copy_format(self) -> Literal["binary", "text"]:
        return self._shape.copy_format

    def encode(self, device_id: uuid.UUID, batch: RowBatch) -> bytes:
        """The batch's rows as COPY data for the staging table (device id first). Raises
        BatchRejected for a value that does not fit its column: before anything is
        written, so the caller can stage that batch alone."""
        return batch.encode_state_copy(self._copy_columns(),
                                       binary=self.copy_format == "binary",
                                       device_id=str(device_id))

    async def apply(self, conn: Conn, device_id: uuid.UUID, batch: RowBatch) -> int:
        """Upsert one batch; returns how many target rows changed. Runs inside the caller's
        transaction (the ledger row commits with it)."""
        if self.plain:
            written = await self.write_group(conn, [(batch, self.encode(device_id, batch))],
                                             set())
            assert written is not None  # (no tail)
            return written
        return await self.apply_encoded(conn, device_id, batch, self.encode(device_id, batch))

    async def write_group(self, conn: Conn, parts: list[tuple[RowBatch, bytes]],
                          used: set[str], *, distinct_devices: bool = False,
                          tail: CommitTail | None = None) -> int | None:
        """Upsert the batches of many devices (``parts``: each batch with its ``encode``
        output) with one COPY and one statement; returns the target rows changed. Only
        for ``plain`` targets. ``used``: the staging tables this transaction has filled
        already (it is emptied first when used again before the commit empties it).
        ``distinct_devices``: no two parts are of the same device. ``tail``: the upsert
        runs with the transaction's COMMIT (``store.committing``), and None is returned.

        ``INSERT … ON CONFLICT`` probes the primary key once per row, so a batch costs the
        same however many rows the device already has. (A MERGE joins the batch to the
        target instead, and PostgreSQL may then hash every row of the device: 2.5 times
        the cost per batch on a target of 100k rows, see docs/benchmarks.md.)"""
        assert self.plain
        ddl = self.layout
        # One staging table per column layout and connection, emptied at commit: no
        # catalog churn per batch, and one truncation per layout at commit.
        staging = self._shape.staging
        if staging in used:
            if tail is not None:  # an upsert deferred from it reads it first
                await tail.flush(conn)
            await conn.execute(f"DELETE FROM {staging}")
        else:
            create = f"CREATE TEMP TABLE IF NOT EXISTS {staging} {ddl} ON COMMIT DELETE ROWS"
            if tail is not None:  # (the BEGIN may have carried it)
                await tail.ensure(conn, create)
            else:
                await conn.execute(create)
            used.add(staging)
        fmt = self.copy_format
        await conn.copy_to_table(staging, format=fmt,
                                 source=copy_stream([c for _, c in parts], fmt))  # type: ignore[arg-type]
        # The newest change of each (device, key) is needed only when one could be there
        # twice: no sort when every batch is of another device and its keys are distinct.
        keys_unique = ((len(parts) == 1 or distinct_devices)
                       and all(batch.keys_are_unique for batch, _ in parts))
        upsert = self._shape.group_upserts.get(keys_unique)
        if upsert is None:
            upsert = self._upsert_sql(_newest(staging, keys_unique), "n._edge_device")
            self._shape.group_upserts[keys_unique] = upsert
        if tail is not None:
            tail.defer(upsert)
            return None
        status: str = await conn.execute(upsert)
        return int(status.rsplit(" ", 1)[-1])

    def _upsert_sql(self, source: str, device: str) -> str:
        # In the staging table's order: every group of a layout sends the same text
        # (the bindings are read in random order: their ids are UUIDs).
        targets = [quote_ident(c.target) for c in self._shape.ordered]
        insert_cols = ", ".join(
            ["device_id", "_edge_pk_hash", "_edge_journal_epoch", "_edge_commit_seq",
             "_edge_deleted", *targets])
        # Platform columns of the temp table use the reserved _edge_ prefix, so no mirrored
        # column (never _edge_*) can collide with them.
        select_cols = ", ".join([device, "_edge_pk_hash", "_edge_epoch", "_edge_seq",
                                 "_edge_deleted", *targets])
        updates = ", ".join(
            f"{c} = EXCLUDED.{c}" for c in
            ["_edge_journal_epoch", "_edge_commit_seq", "_edge_deleted", *targets])
        return (f"INSERT INTO {quote_ident(self.table)} AS t ({insert_cols}) "
                f"SELECT {select_cols} FROM {source} AS n "
                f"ON CONFLICT (device_id, _edge_pk_hash) DO UPDATE SET {updates}, "
                "_edge_synced_at = now() "
                "WHERE (t._edge_journal_epoch, t._edge_commit_seq) "
                "< (EXCLUDED._edge_journal_epoch, EXCLUDED._edge_commit_seq)")

    async def apply_encoded(self, conn: Conn, device_id: uuid.UUID, batch: RowBatch,
                            copy: bytes) -> int:
        """One batch (``copy`` from ``encode``) of a target with mapped columns or cloud
        authority: its own temp table, dropped at the end."""
        staging = f"_edge_in_{next(_temp_names)}"
        await conn.execute(f"CREATE TEMP TABLE {staging} {self.layout} ON COMMIT DROP")
        # A memoryview: asyncpg would take plain bytes for a file path.
        await conn.copy_to_table(staging, source=memoryview(copy),  # type: ignore[arg-type]
                                 format=self.copy_format)
        targets = [quote_ident(c.target) for c in self.columns]
        insert_cols = ", ".join(
            ["device_id", "_edge_pk_hash", "_edge_journal_epoch", "_edge_commit_seq",
             "_edge_deleted", *targets])
        select_cols = ", ".join(["$1::uuid", "_edge_pk_hash", "_edge_epoch", "_edge_seq",
                                 "_edge_deleted", *targets])
        updates = ", ".join(
            f"{c} = EXCLUDED.{c}" for c in
            ["_edge_journal_epoch", "_edge_commit_seq", "_edge_deleted", *targets])
        if self.cloud_authoritative:
            written = await self._apply_cloud_authoritative(
                conn, device_id, batch, staging, insert_cols, select_cols, updates)
        else:
            written = await self._upsert(
                conn, staging,
                self._upsert_sql(_newest(staging, batch.keys_are_unique), "$1::uuid"),
                device_id)
        await conn.execute(f"DROP TABLE IF EXISTS {staging}")
        return written

    async def _upsert(self, conn: Conn, staging: str, sql: str, *args: object) -> int:
        """Run the upsert; with mapped columns, also record the values of the rows it
        wrote (the winners), in the same statement."""
        if not self.mapped:
            status: str = await conn.execute(sql, *args)
            return int(status.rsplit(" ", 1)[-1])
        count: int = await conn.fetchval(state_values_sql(sql, staging, self.mapped), *args)
        return count

    async def _apply_cloud_authoritative(self, conn: Conn, device_id: uuid.UUID,
                                         batch: RowBatch, staging: str, insert_cols: str,
                                         select_cols: str, updates: str) -> int:
        """Newer-wins as usual, and a device change made against an older cloud version
        than the row's current one loses; those keys are kept in ``self.conflicts`` so
        the caller can send the device the cloud's row again."""
        hashes, seqs, lkcvs = (list(x) for x in zip(*batch.lkcv_rows(), strict=True)) \
            if batch.lkcv_rows() else ([], [], [])
        q = quote_ident(self.table)
        latest = (
            f"SELECT DISTINCT ON (s._edge_pk_hash) s.*, l.v AS _edge_lkcv FROM {staging} s "
            "LEFT JOIN unnest($2::text[], $3::bigint[], $4::bigint[]) AS l(h, n, v) "
            "ON l.h = s._edge_pk_hash AND l.n = s._edge_seq "
            "ORDER BY s._edge_pk_hash, s._edge_epoch DESC, s._edge_seq DESC")
        written = await self._upsert(
            conn, staging,
            f"INSERT INTO {q} AS t ({insert_cols}, _edge_lkcv) "
            f"SELECT {select_cols}, _edge_lkcv FROM ({latest}) x "
            f"ON CONFLICT (device_id, _edge_pk_hash) DO UPDATE SET {updates}, "
            "_edge_lkcv = EXCLUDED._edge_lkcv, _edge_synced_at = now() "
            "WHERE (t._edge_journal_epoch, t._edge_commit_seq) "
            "< (EXCLUDED._edge_journal_epoch, EXCLUDED._edge_commit_seq) "
            "AND (t._edge_cloud_version IS NULL "
            "     OR coalesce(EXCLUDED._edge_lkcv, 0) >= t._edge_cloud_version)",
            device_id, hashes, seqs, lkcvs)
        rows = await conn.fetch(
            f"SELECT t._edge_pk_hash FROM ({latest}) x JOIN {q} t "
            "ON t.device_id = $1 AND t._edge_pk_hash = x._edge_pk_hash "
            "WHERE t._edge_cloud_version > coalesce(x._edge_lkcv, 0)",
            device_id, hashes, seqs, lkcvs)
        self.conflicts = [r["_edge_pk_hash"] for r in rows]
        return written
