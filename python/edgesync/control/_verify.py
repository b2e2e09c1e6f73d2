"""Device/cloud verification of a state table (docs/recovery.md, docs/protocol.md
"Table digest").

``request_verify`` picks the approved mirrored columns the digest can cover (a column
mirrored as ``bigint``, ``double precision``, ``text`` or ``bytea``; others are listed
as skipped), records the job (``edge_verifications``) and queues a ``verify_table``
control naming them. The device answers a ``verify_digest`` report: its row count and
buckets, taken when every change of the table it had journaled was committed by the
cloud, with the journal position it reflects (``as_of_commit_seq``).
``record_verify_digest`` computes the same digest over the mirror (tombstones
excluded) with the same code (``protocol.TableDigest``) and stores which buckets
differ. A bucket holding a cloud row changed after the digest (newer than ``as_of``) is
reported as *changed*, not as differing. With ``repair`` the differing buckets are
re-snapshotted (a hash-bucket filter).
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import asyncpg

from edgesync.control._jobs import Verification, VerificationStatus, recovery_job
from edgesync.control._outbox import enqueue_control
from edgesync.control._resnapshot import _rows_lineage, lineage_columns, request_resnapshot
from edgesync.errors import InvalidRequestError
from edgesync.governance import EventType, Lineage, emit, load_state_target
from edgesync.materialize import quote_ident
from edgesync.protocol import (
    DIGEST_VERSION,
    MAX_PREFIX,
    ControlKind,
    SnapshotFilter,
    TableDigest,
    differing_buckets,
    uuid7,
)
from edgesync.store import Conn

__all__ = ["DEFAULT_PREFIX", "record_verify_digest", "request_verify"]

DEFAULT_PREFIX = 2
_HEX = re.compile(r"^[0-9a-f]+$")
_SUM = re.compile(r"^[0-9a-f]{32}$")
_LAST_EPOCH, _LAST_SEQ = uuid.UUID(int=(1 << 128) - 1), (1 << 63) - 1
# Mirror types whose values read back as the device's (docs/protocol.md, "Table digest").
_NATIVE = ("bigint", "double precision", "text", "bytea")


async def _digest_columns(conn: Conn, lineage: Lineage
                          ) -> tuple[list[tuple[str, str, bool]], list[str]]:
    """``([(source, mirror column, as text)], skipped source columns)``."""
    if lineage.approved_schema_hash is None or lineage.target_table is None:
        raise InvalidRequestError("lineage_id", "this lineage has no approved schema yet: "
                                  "approve its schema review before verifying it")
    target = await load_state_target(conn, lineage, lineage.approved_schema_hash)
    if target is None:
        raise InvalidRequestError("lineage_id", "this lineage has no state table yet")
    affinity, _ = await lineage_columns(conn, lineage)
    cols, skipped = [], []
    for c in sorted(target.columns, key=lambda c: c.source):
        if c.pg_type not in _NATIVE:
            skipped.append(c.source)
            continue
        cols.append((c.source, c.target, affinity.get(c.source) == "NUMERIC"))
    return cols, skipped


async def request_verify(conn: Conn, project_id: uuid.UUID, lineage_id: uuid.UUID, *,
                         prefix: int = DEFAULT_PREFIX, repair: bool = False,
                         actor: str | None = None) -> Verification:
    """Record a verification and queue its control (caller's transaction)."""
    if not 1 <= prefix <= MAX_PREFIX:
        raise InvalidRequestError("prefix", f"must be from 1 to {MAX_PREFIX} hex digits")
    lineage = await _rows_lineage(conn, project_id, lineage_id)
    cols, skipped = await _digest_columns(conn, lineage)
    job_id = uuid.UUID(uuid7())
    wire = [{"name": s, "text": t} if t else {"name": s} for s, _, t in cols]
    await conn.execute(
        "INSERT INTO edge_verifications (id, project_id, lineage_id, device_id, prefix, "
        "columns, skipped_columns, repair, requested_by) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        job_id, project_id, lineage_id, lineage.device_id, prefix, wire, skipped, repair, actor)
    await enqueue_control(conn, device_id=lineage.device_id, lineage_id=lineage_id,
                          kind=ControlKind.VERIFY_TABLE,
                          body={"source_table": lineage.source_table, "job_id": str(job_id),
                                "digest_version": DIGEST_VERSION, "prefix": prefix,
                                "columns": wire})
    await emit(conn, project_id, EventType.VERIFICATION_REQUESTED, lineage_id,
               {"lineage_id": str(lineage_id), "verification_id": str(job_id),
                "prefix": prefix, "repair": repair, "actor": actor})
    return await recovery_job(conn, "verification", job_id)


async def _cloud_digest(conn: Conn, target: str, device_id: uuid.UUID,
                        cols: list[tuple[str, str, bool]], prefix: int,
                        as_of: tuple[uuid.UUID, int] | None) -> tuple[TableDigest, set[str]]:
    """The mirror's digest (live rows) and the buckets holding a change newer than
    ``as_of`` (a live row or a tombstone)."""
    digest = TableDigest(prefix, frozenset(i for i, c in enumerate(cols) if c[2]))
    changed: set[str] = set()
    select = ", ".join(quote_ident(t) for _, t, _ in cols) or "NULL AS none"
    newer = "(_edge_journal_epoch, _edge_commit_seq) > ($2, $3)"
    epoch, seq = as_of if as_of else (_LAST_EPOCH, _LAST_SEQ)  # then nothing is newer
    async with conn.transaction():
        async for r in conn.cursor(
                f"SELECT _edge_pk_hash, _edge_deleted, {newer} AS newer, {select} "
                f"FROM {quote_ident(target)} WHERE device_id = $1 "
                f"AND (NOT _edge_deleted OR {newer})", device_id, epoch, seq, prefetch=2000):
            pk_hash = r[0]
            if r[2]:
                changed.add(pk_hash[:prefix])
            if not r[1]:
                digest.add(pk_hash, [r[i] for i in range(3, 3 + len(cols))])
    return digest, changed


def _report_error(doc: dict[str, Any], prefix: int) -> str | None:
    if doc.get("error"):
        return str(doc["error"])[:500]
    if doc.get("digest_version") != DIGEST_VERSION:
        return f"digest_version {doc.get('digest_version')!r} is not {DIGEST_VERSION}"
    buckets, rows = doc.get("buckets"), doc.get("rows")
    if not isinstance(buckets, dict) or not isinstance(rows, int) or isinstance(rows, bool):
        return "verify_digest needs rows (an integer) and buckets (an object)"
    for key, value in buckets.items():
        if not (len(key) == prefix and _HEX.match(key) and isinstance(value, list)
                and len(value) == 2 and isinstance(value[0], int)
                and isinstance(value[1], str) and _SUM.match(value[1])):
            return (f"bucket {key[:16]!r}: buckets are {{\"<{prefix} hex digits>\": "
                    "[rows, \"<32 hex digits>\"]}")
    return None


async def record_verify_digest(conn: Conn, device_id: uuid.UUID, table: str,
                               doc: dict[str, Any]) -> str:
    """A device's ``verify_digest`` report: compare with the mirror, store the result,
    emit the event, start the repair. Returns what it did."""
    try:
        job_id = uuid.UUID(str(doc.get("job_id")))
        epoch = uuid.UUID(str(doc["journal_epoch"])) if doc.get("journal_epoch") else None
    except ValueError:
        raise InvalidRequestError("job_id", "verify_digest needs a job_id UUID and a "
                                  "journal_epoch UUID") from None
    row = await conn.fetchrow(
        "SELECT v.*, l.target_table FROM edge_verifications v JOIN edge_table_lineages l "
        "ON l.id = v.lineage_id WHERE v.id = $1 AND v.device_id = $2 AND l.source_table = $3 "
        "AND v.status = 'requested' FOR UPDATE OF v", job_id, device_id, table)
    if row is None:
        return f"verification {job_id}: nothing to update"
    lineage_id, prefix = row["lineage_id"], int(row["prefix"])
    error = _report_error(doc, prefix)
    result: dict[str, Any] = {"status": VerificationStatus.FAILED, "error": error}
    if error is None:
        cols = await _current_columns(conn, row)
        as_of = doc.get("as_of_commit_seq")
        try:
            digest, changed = await _cloud_digest(
                conn, row["target_table"], device_id, cols, prefix,
                (epoch, as_of) if epoch is not None and isinstance(as_of, int) else None)
        except asyncpg.PostgresError as exc:  # the mirror changed by hand (a column gone)
            result["error"] = f"the mirror cannot be read: {type(exc).__name__}: {exc}"[:500]
        else:
            differ = [b for b in differing_buckets(doc["buckets"], digest.buckets())
                      if b not in changed]
            result = {"status": (VerificationStatus.DIFFERENT if differ
                                 else VerificationStatus.EQUAL),
                      "device_rows": doc["rows"], "cloud_rows": digest.rows,
                      "differing_buckets": differ, "changed_buckets": sorted(changed)}
    await conn.execute(
        "UPDATE edge_verifications SET status = $2, error = $3, device_rows = $4, "
        "cloud_rows = $5, differing_buckets = $6, changed_buckets = $7, completed_at = now() "
        "WHERE id = $1", job_id, result["status"], result.get("error"),
        result.get("device_rows"), result.get("cloud_rows"), result.get("differing_buckets"),
        result.get("changed_buckets"))
    resnapshot_id = None
    if row["repair"] and result.get("differing_buckets"):
        scope = SnapshotFilter(prefix=prefix, buckets=frozenset(result["differing_buckets"]))
        job = await request_resnapshot(conn, row["project_id"], lineage_id,
                                       actor=row["requested_by"], verification_id=job_id,
                                       parsed=scope)
        resnapshot_id = job.id
        await conn.execute("UPDATE edge_verifications SET resnapshot_id = $2 WHERE id = $1",
                           job_id, resnapshot_id)
    await emit(conn, row["project_id"], EventType.VERIFICATION_FINISHED, lineage_id,
               {"lineage_id": str(lineage_id), "verification_id": str(job_id),
                "status": result["status"], "error": result.get("error"),
                "device_rows": result.get("device_rows"), "cloud_rows": result.get("cloud_rows"),
                "differing_buckets": result.get("differing_buckets"),
                "resnapshot_id": resnapshot_id and str(resnapshot_id)})
    return f"verification {job_id}: {result['status']}"


async def _current_columns(conn: Conn, row: Any) -> list[tuple[str, str, bool]]:
    """The columns the control named, with their mirror names (from the bindings)."""
    names = await conn.fetch(
        "SELECT b.source_column_name, b.mirror_column_name FROM edge_column_bindings b "
        "JOIN edge_table_lineages l ON l.id = b.lineage_id "
        "AND b.schema_hash = l.approved_schema_hash WHERE l.id = $1", row["lineage_id"])
    mirror = {r["source_column_name"]: r["mirror_column_name"] for r in names}
    return [(c["name"], mirror.get(c["name"]) or c["name"], bool(c.get("text")))
            for c in row["columns"]]
