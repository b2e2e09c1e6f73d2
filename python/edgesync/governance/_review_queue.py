"""Review rows, of both kinds: a device review of one lineage's schema version
(``edge_schema_reviews``), or a registry review of a (scope, table, hash) entry
(``edge_registry_reviews``). This module is their one writer: opening one (inserted once,
a second call is a no-op, announced with its ``….queued.v1`` event) and recording a
transition of the one state machine both follow (queued → in_review → approved /
rejected / abandoned, ``action_version`` counting the steps).

Its own module because admission opens both, the registry opens registry reviews and
abandoning a registry review opens device reviews: kept in any of them, the three imported
each other.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

import asyncpg

from edgesync.governance._events import EventType, emit
from edgesync.store import Conn

__all__ = ["ReviewKind", "open_device_review", "open_registry_review", "record_transition",
           "reopen_device_review"]

ReviewKind = Literal["device", "registry"]

_TRANSITION: dict[ReviewKind, str] = {
    "device": "UPDATE edge_schema_reviews SET status = $2, action_version = action_version + 1, "
    "updated_at = now(), decided_by = CASE WHEN $2 = 'in_review' THEN decided_by ELSE $3 END",
    "registry": "UPDATE edge_registry_reviews SET status = $2, "
    "action_version = action_version + 1, updated_at = now(), "
    "decided_by = CASE WHEN $2 = 'in_review' THEN decided_by ELSE $3 END",
}


async def record_transition(conn: Conn, kind: ReviewKind, review_id: uuid.UUID, status: str,
                            actor: str, **fields: Any) -> None:
    """The review moves to ``status`` (``actor`` decided it, unless it is only claimed);
    ``fields`` are the step's own columns (``claimed_by``, ``column_actions``,
    ``decision_reason``)."""
    sets = "".join(f", {k} = ${i}" for i, k in enumerate(fields, start=4))
    await conn.execute(_TRANSITION[kind] + sets + " WHERE id = $1",
                       review_id, status, actor, *fields.values())


async def reopen_device_review(conn: Conn, lineage_id: uuid.UUID, version_id: uuid.UUID,
                               schema_hash: str, classification: str) -> uuid.UUID | None:
    """A new review of an approved version (its deferred columns to decide); None when
    the lineage has an open review already. The caller emits the event."""
    review_id = await conn.fetchval(
        "INSERT INTO edge_schema_reviews (id, lineage_id, schema_version_id, schema_hash, "
        "classification) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING id",
        uuid.uuid4(), lineage_id, version_id, schema_hash, classification)
    return review_id if isinstance(review_id, uuid.UUID) else None


async def open_device_review(conn: Conn, project_id: uuid.UUID, lineage_id: uuid.UUID,
                             version_id: uuid.UUID, schema_hash: str,
                             classification: str) -> None:
    review_id = await conn.fetchval(
        "INSERT INTO edge_schema_reviews (id, lineage_id, schema_version_id, schema_hash, "
        "classification) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING id",
        uuid.uuid4(), lineage_id, version_id, schema_hash, classification)
    if review_id is not None:
        await emit(conn, project_id, EventType.SCHEMA_REVIEW_QUEUED, review_id,
                   {"review_id": str(review_id), "lineage_id": str(lineage_id),
                    "schema_hash": schema_hash, "classification": classification})


async def open_registry_review(conn: Conn, entry: asyncpg.Record) -> None:
    """A queued review of the registry entry (a row of ``edge_schema_registry``), unless
    one is open."""
    review_id = await conn.fetchval(
        "INSERT INTO edge_registry_reviews (id, registry_id, project_id) VALUES ($1, $2, $3) "
        "ON CONFLICT DO NOTHING RETURNING id", uuid.uuid4(), entry["id"], entry["project_id"])
    if review_id is not None:
        await emit(conn, entry["project_id"], EventType.REGISTRY_REVIEW_QUEUED,
                   review_id, {"review_id": str(review_id), "registry_id": str(entry["id"]),
                               "source_table": entry["source_table"],
                               "schema_hash": entry["schema_hash"]})
