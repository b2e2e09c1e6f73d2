"""Rows a completed re-snapshot shows the device no longer has (docs/recovery.md).

Every row the device had when its re-snapshot read it is journaled again with a
``commit_seq`` at or after the re-snapshot's first one, and a row changed later has a
newer one still; so once the re-snapshot's rows are all committed, a live cloud row in
its scope whose ``(journal_epoch, commit_seq)`` is older than that first change is a
row the device does not have. It becomes a tombstone versioned just below the
re-snapshot (a later device change still wins). Rows with an open quarantined change
are left alone: their re-sent change may be the quarantined one.
"""

from __future__ import annotations

import uuid

from edgesync.materialize._identifiers import quote_ident
from edgesync.store import Conn

__all__ = ["sweep_state_rows"]


async def sweep_state_rows(conn: Conn, target: str, *, device_id: uuid.UUID,
                           lineage_id: uuid.UUID, epoch: uuid.UUID, first_seq: int,
                           prefix: int = 0, buckets: list[str] | None = None) -> int:
    """Tombstone the rows older than ``(epoch, first_seq)`` (of the given pk-hash
    buckets, or all); returns how many."""
    status = await conn.execute(
        f"UPDATE {quote_ident(target)} t SET _edge_deleted = true, "
        "_edge_journal_epoch = $3, _edge_commit_seq = $4 - 1, _edge_synced_at = now() "
        "WHERE t.device_id = $1 AND NOT t._edge_deleted "
        "AND (t._edge_journal_epoch, t._edge_commit_seq) < ($3, $4) "
        "AND ($5::text[] IS NULL OR left(t._edge_pk_hash, $6) = ANY($5)) "
        "AND NOT EXISTS (SELECT 1 FROM edge_quarantined_rows q WHERE q.lineage_id = $2 "
        "AND q.status = 'open' AND q.pk_hash = t._edge_pk_hash)",
        device_id, lineage_id, epoch, first_seq, buckets, prefix)
    return int(status.split()[-1])
