"""Opening a review: a device review of one lineage's schema version, or a registry review
of a (scope, table, hash) entry. Each is inserted once (a second call is a no-op) and
announced with its ``….queued.v1`` event.

Its own module because admission opens both, the registry opens registry reviews and
abandoning a registry review opens device reviews: kept in any of them, the three imported
each other.
"""

from __future__ import annotations

import uuid
from typing import Any

from edgesync.governance._events import EventType, emit
from edgesync.store import Conn

__all__ = ["open_device_review", "open_registry_review"]


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


async def open_registry_review(conn: Conn, entry: dict[str, Any]) -> None:
    review_id = await conn.fetchval(
        "INSERT INTO edge_registry_reviews (id, registry_id, project_id) VALUES ($1, $2, $3) "
        "ON CONFLICT DO NOTHING RETURNING id", uuid.uuid4(), entry["id"], entry["project_id"])
    if review_id is not None:
        await emit(conn, entry["project_id"], EventType.REGISTRY_REVIEW_QUEUED,
                   review_id, {"review_id": str(review_id), "registry_id": str(entry["id"]),
                               "source_table": entry["source_table"],
                               "schema_hash": entry["schema_hash"]})
