"""Recovery offers (docs/recovery.md, "Offered at the right moment"): the re-snapshot or
verification a lineage's detail suggests to an operator, and why.

Nothing is stored: an offer is derived, on each read, from what is already recorded —
capture gaps (``edge_capture_gaps``), lineage deletes (the ``lineage_deleted`` events)
and the lineage's re-snapshots and verifications — so it cannot go stale and it goes
away by itself once the action it asks for has succeeded. One query, whatever the number
of gaps (they are aggregated, not looped over).

The rules:

* ``capture_gap`` → ``resnapshot``: the device dropped journaled changes (its
  ``local_retention_bytes`` was exceeded) after it had sent some of the table. Its
  automatic re-seed re-sends every current row, but a row it deleted in the dropped range
  stays in the cloud; a whole-table re-snapshot sweeps it. Offered while a recorded gap of
  the lineage is not followed by a *completed whole-table re-snapshot* or an *equal
  verification* requested after it was reported.
* ``recreated_after_delete`` → ``verify``: the lineage was created after a lineage of the
  same (device, table) was deleted; the device started the table over, and the state
  table kept the old rows. Offered until a verification requested after the lineage's
  creation comes back equal.

Only for approved state lineages (the only ones either action is allowed on); withheld
while a job that would satisfy it is still under way (so a console does not offer it
twice), and back if that job fails or comes back different.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from datetime import datetime

from edgesync.control._jobs import ResnapshotStatus, VerificationStatus
from edgesync.governance import EventType
from edgesync.store import Conn

__all__ = ["OfferReason", "RecoveryAction", "RecoveryOffer", "recovery_offers"]


class RecoveryAction(enum.StrEnum):
    """What an offer asks the operator to do (``POST …/lineages/{id}/<action>``)."""

    RESNAPSHOT = "resnapshot"
    VERIFY = "verify"


class OfferReason(enum.StrEnum):
    """Why the lineage's detail offers it."""

    CAPTURE_GAP = "capture_gap"
    RECREATED_AFTER_DELETE = "recreated_after_delete"


@dataclass(frozen=True, slots=True)
class RecoveryOffer:
    action: RecoveryAction
    reason: OfferReason
    detail: str  # one sentence for a person
    since: datetime  # the gap's report, or the lineage's creation
    gap_id: int | None = None  # capture_gap: the first gap not repaired yet


_DONE = f"'{ResnapshotStatus.COMPLETED}'"
_EQUAL = f"'{VerificationStatus.EQUAL}'"
_RES_OPEN = f"('{ResnapshotStatus.REQUESTED}', '{ResnapshotStatus.RUNNING}')"
_VER_OPEN = f"'{VerificationStatus.REQUESTED}'"
# Literals, not parameters: the partial index on deletes (migration 0016) is only used
# when its predicate is in the statement's text.
_DELETED = f"'{EventType.LINEAGE_DELETED}'"

# ``proof``: the newest request time of a job that showed the whole table current. The
# gaps are read through their open-gaps index (device_id WHERE resolved_at IS NULL).
_OFFERS = f"""
WITH l AS (
    SELECT id, project_id, device_id, source_table, created_at FROM edge_table_lineages
    WHERE id = $1 AND pipeline = 'rows' AND approved_schema_hash IS NOT NULL
      AND target_table IS NOT NULL),
proof AS (
    SELECT max(created_at) AS at FROM (
        SELECT created_at FROM edge_resnapshots
        WHERE lineage_id = $1 AND status = {_DONE} AND filter = '{{}}'::jsonb
        UNION ALL
        SELECT created_at FROM edge_verifications
        WHERE lineage_id = $1 AND status = {_EQUAL}) j),
gaps AS (
    SELECT min(g.id) AS gap_id, min(g.reported_at) AS since, max(g.reported_at) AS newest,
           count(*) AS n,
           (array_agg(g.first_commit_seq ORDER BY g.id))[1] AS first_seq,
           (array_agg(g.last_commit_seq ORDER BY g.id))[1] AS last_seq
    FROM edge_capture_gaps g, l, proof
    WHERE g.device_id = l.device_id AND g.resolved_at IS NULL AND g.lineage_id = l.id
      AND (proof.at IS NULL OR g.reported_at >= proof.at))
SELECT 'resnapshot' AS action, gaps.gap_id, gaps.since, gaps.n, gaps.first_seq,
       gaps.last_seq, NULL::text AS last_status
FROM gaps
WHERE gaps.n > 0
  AND NOT EXISTS (SELECT 1 FROM edge_resnapshots r WHERE r.lineage_id = $1
                  AND r.status IN {_RES_OPEN} AND r.filter = '{{}}'::jsonb
                  AND r.created_at > gaps.newest)
  AND NOT EXISTS (SELECT 1 FROM edge_verifications v WHERE v.lineage_id = $1
                  AND v.status = {_VER_OPEN} AND v.created_at > gaps.newest)
UNION ALL
SELECT 'verify', NULL, l.created_at, NULL, NULL, NULL,
       (SELECT v.status FROM edge_verifications v WHERE v.lineage_id = l.id
        AND v.created_at >= l.created_at ORDER BY v.created_at DESC LIMIT 1)
FROM l
WHERE EXISTS (SELECT 1 FROM edge_events e WHERE e.project_id = l.project_id
              AND e.event_type = {_DELETED}
              AND e.body->>'device_id' = l.device_id::text
              AND e.body->>'source_table' = l.source_table
              AND e.created_at <= l.created_at)
  AND NOT EXISTS (SELECT 1 FROM edge_verifications v WHERE v.lineage_id = l.id
                  AND v.created_at >= l.created_at
                  AND v.status IN ({_EQUAL}, {_VER_OPEN}))
ORDER BY action
"""


def _gap_detail(n: int, first: int | None, last: int | None) -> str:
    which = f"commit_seq {first}..{last}" if first is not None and last is not None else \
        "a range of changes"
    dropped = (f"dropped {which} of this table" if n == 1 else
               f"dropped {n} ranges of changes of this table (the first {which})")
    return (f"The device {dropped} over its local_retention_bytes; its automatic re-seed "
            "re-sent every current row, but rows it deleted meanwhile may still be in the "
            "cloud: a whole-table re-snapshot sends the table again and sweeps them.")


def _verify_detail(last_status: str | None) -> str:
    text = ("This lineage was re-created after a delete: the device sent its table again "
            "while the state table kept its earlier rows, so verify that they agree")
    if last_status == VerificationStatus.DIFFERENT:
        return text + " (the last verification found buckets differing: verify with " \
                      "repair to re-send them, then verify again)."
    if last_status == VerificationStatus.FAILED:
        return text + " (the last verification failed: see its error)."
    return text + "."


async def recovery_offers(conn: Conn, lineage_id: uuid.UUID) -> list[RecoveryOffer]:
    """What the lineage's detail offers now (resnapshot first), in one query."""
    out = []
    for r in await conn.fetch(_OFFERS, lineage_id):
        if r["action"] == RecoveryAction.RESNAPSHOT:
            out.append(RecoveryOffer(RecoveryAction.RESNAPSHOT, OfferReason.CAPTURE_GAP,
                                     _gap_detail(int(r["n"]), r["first_seq"], r["last_seq"]),
                                     r["since"], int(r["gap_id"])))
        else:
            out.append(RecoveryOffer(RecoveryAction.VERIFY, OfferReason.RECREATED_AFTER_DELETE,
                                     _verify_detail(r["last_status"]), r["since"]))
    return out
