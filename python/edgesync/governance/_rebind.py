"""Rows of a rejected schema version, written under an approved one when compatible.

Rejecting a review leaves that version's staged rows labelled ``schema_rejected``. When
the device later moves to a version an operator approves, those rows are either
*replayable* under the approved version's bindings or discarded (``staging``'s
``discard_staged``) — never silently left. ``replay_rejected`` checks each rejected
version against the lineage's approved one (``replay_incompatibilities``, the rule in
docs/recovery.md), records ``replay_as_schema_hash`` on the compatible ones, and
schedules a replay: the replayer then writes their staged rows with the approved
bindings, and admission does the same for later batches of that version.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from edgesync.errors import ConflictError, NotFoundError
from edgesync.governance._classify import classify
from edgesync.governance._events import EventType, emit
from edgesync.governance._lineages import Lineage
from edgesync.governance._replay import schedule_replay
from edgesync.governance._statuses import SchemaStatus
from edgesync.governance._versions import set_replay_as
from edgesync.store import Conn

__all__ = ["RebindOutcome", "RejectedVersion", "replay_incompatibilities", "replay_rejected"]

Columns = list[dict[str, Any]]


def replay_incompatibilities(approved: Columns | None, rejected: Columns | None) -> list[str]:
    """Why rows of the ``rejected`` columns cannot be written with the bindings of the
    ``approved`` ones (empty: they can). Compatible means every value lands where the
    approved bindings put a value of that column, and each row keeps its key: the same
    primary key (columns and order), and every rejected column is an approved column of
    the same type affinity. Approved columns the rejected version lacks are written NULL
    (as an additive change would); NOT NULL flags do not matter (cloud columns are
    nullable)."""
    if rejected is None:
        return ["the rejected version's columns are unknown (no batch carried them)"]
    if approved is None:
        return ["the approved version's columns are unknown"]
    _, diff = classify(approved, rejected)
    reasons = []
    if diff.added:
        reasons.append("columns the approved version does not have (their values would be "
                       f"lost): {', '.join(diff.added)}")
    if diff.type_changed:
        reasons.append(f"type affinity differs: {', '.join(diff.type_changed)}")
    pk_of = [{str(c["name"]): c["pk_ordinal"] for c in cols if c["pk_ordinal"]}
             for cols in (approved, rejected)]
    if pk_of[0] != pk_of[1] or diff.pk_changed:
        reasons.append(f"primary key differs: {_key_words(pk_of[1])} instead of "
                       f"{_key_words(pk_of[0])}")
    return reasons


def _key_words(pk: dict[str, Any]) -> str:
    return "(" + ", ".join(sorted(pk, key=lambda c: pk[c])) + ")"


@dataclass(slots=True)
class RejectedVersion:
    schema_hash: str
    compatible: bool
    reasons: list[str]
    staged_batches: int
    staged_rows: int
    rebound: bool = False


@dataclass(slots=True)
class RebindOutcome:
    lineage_id: uuid.UUID
    approved_schema_hash: str
    dry_run: bool
    versions: list[RejectedVersion] = field(default_factory=list)

    @property
    def rebound_batches(self) -> int:
        return sum(v.staged_batches for v in self.versions if v.rebound)

    @property
    def rebound_rows(self) -> int:
        return sum(v.staged_rows for v in self.versions if v.rebound)

    def as_json(self) -> dict[str, Any]:
        return {"lineage_id": self.lineage_id, "approved_schema_hash": self.approved_schema_hash,
                "dry_run": self.dry_run, "rebound_batches": self.rebound_batches,
                "rebound_rows": self.rebound_rows,
                "versions": [{"schema_hash": v.schema_hash, "compatible": v.compatible,
                              "reasons": v.reasons, "staged_batches": v.staged_batches,
                              "staged_rows": v.staged_rows, "rebound": v.rebound}
                             for v in self.versions]}


async def replay_rejected(conn: Conn, lineage: Lineage, *, actor: str,
                          schema_hash: str | None = None,
                          dry_run: bool = False) -> RebindOutcome:
    """Check the lineage's rejected versions (or the one ``schema_hash``) against its
    approved version and, unless ``dry_run``, rebind the compatible ones and schedule the
    replay of their staged rows. A named version that is not compatible is a conflict
    (nothing changes); without a name, incompatible versions are only reported. The
    caller holds the lineage row lock."""
    approved = lineage.approved_schema_hash
    if approved is None:
        raise ConflictError(f"lineage {lineage.id} has no approved schema version: approve "
                            "one first (rows of a rejected version replay under it)")
    deferred = await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM edge_column_bindings WHERE lineage_id = $1 "
        "AND schema_hash = $2 AND action = 'defer')", lineage.id, approved)
    if deferred:
        raise ConflictError(f"the approved version {approved[:12]}… has deferred columns: "
                            "decide them first (lineages reopen-review)")
    approved_doc = await conn.fetchval(
        "SELECT schema_columns FROM edge_schema_versions WHERE lineage_id = $1 "
        "AND schema_hash = $2", lineage.id, approved)
    rows = await conn.fetch(
        "SELECT v.schema_hash, v.schema_columns, v.replay_as_schema_hash, "
        "  count(s.id) AS batches, coalesce(sum(s.row_count), 0) AS staged_rows "
        "FROM edge_schema_versions v LEFT JOIN edge_staged_rows s "
        "  ON s.lineage_id = v.lineage_id AND s.schema_hash = v.schema_hash "
        "WHERE v.lineage_id = $1 AND v.status = $2 AND ($3::text IS NULL OR v.schema_hash = $3) "
        "GROUP BY v.id ORDER BY v.first_seen_at", lineage.id, SchemaStatus.REJECTED, schema_hash)
    if schema_hash is not None and not rows:
        raise NotFoundError(f"lineage {lineage.id} has no rejected schema version {schema_hash}")
    out = RebindOutcome(lineage.id, approved, dry_run)
    approved_cols = list(approved_doc["columns"]) if approved_doc else None
    for r in rows:
        doc = r["schema_columns"]
        reasons = replay_incompatibilities(approved_cols, list(doc["columns"]) if doc else None)
        out.versions.append(RejectedVersion(r["schema_hash"], not reasons, reasons,
                                            int(r["batches"]), int(r["staged_rows"])))
    if schema_hash is not None and not out.versions[0].compatible and not dry_run:
        raise ConflictError(f"rows of schema version {schema_hash[:12]}… cannot replay under "
                            f"the approved {approved[:12]}…: {'; '.join(out.versions[0].reasons)}"
                            " — discard them instead (lineages discard-staged --schema-hash)")
    if dry_run:
        return out
    rebound = [v for v in out.versions if v.compatible]
    for v in rebound:
        v.rebound = True
    if not rebound:
        return out
    await set_replay_as(conn, lineage.id, approved, [v.schema_hash for v in rebound])
    if out.rebound_batches:
        await schedule_replay(conn, lineage.id)
    await emit(conn, lineage.project_id, EventType.REJECTED_ROWS_REBOUND, lineage.id,
               {"lineage_id": str(lineage.id), "actor": actor, "approved_schema_hash": approved,
                "schema_hashes": [v.schema_hash for v in rebound],
                "batches": out.rebound_batches, "rows": out.rebound_rows})
    return out
