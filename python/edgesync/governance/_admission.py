"""What happens to a batch: materialize now, or stage (and why).

Runs under the lineage row lock taken by ``lock_lineages``. A hash never seen for
the lineage is recorded and classified; unless project policy lets an additive
change continue, a review is queued and the lineage pauses (a schema-review pause
sends nothing to the device: it keeps publishing and the cloud stages). Under
``schema_coalescing_mode`` project/fleet the registry decides instead (``_registry``).
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from typing import Any

import orjson

from edgesync.fleet import DeviceScope
from edgesync.governance._bindings import approve_schema, load_state_target
from edgesync.governance._classify import Classification, classify
from edgesync.governance._column_actions import ColumnAction, ColumnActionKind
from edgesync.governance._lineages import (
    Lineage,
    LineageStatus,
    PauseReason,
    get_lineage_for_update,
    note_schema_hash,
    pause_lineage,
)
from edgesync.governance._registry import RegistryRoute, registry_key, route_version
from edgesync.governance._review_queue import open_device_review
from edgesync.governance._statuses import SchemaStatus
from edgesync.governance._versions import fill_columns, insert_version
from edgesync.materialize import StateTarget
from edgesync.store import Conn

__all__ = ["Admission", "StagingReason", "admit"]


class StagingReason(enum.StrEnum):
    """Why a batch is staged instead of materialized (``edge_staged_rows.staging_reason``)."""

    SCHEMA_REVIEW = "schema_review"  # its schema waits for a decision
    SCHEMA_REJECTED = "schema_rejected"  # its schema version was rejected: discardable
    LINEAGE_PAUSED = "lineage_paused"  # approved, but the lineage is paused for another reason
    MATERIALIZATION_FAILED = "materialization_failed"  # its values did not fit the target


@dataclass(frozen=True, slots=True)
class Admission:
    lineage: Lineage
    target: StateTarget | None = None
    staging_reason: StagingReason | None = None


async def _approved_columns(conn: Conn, lineage: Lineage
                            ) -> list[dict[str, Any]] | None:
    if lineage.approved_schema_hash is None:
        return None
    doc = await conn.fetchval(
        "SELECT schema_columns FROM edge_schema_versions "
        "WHERE lineage_id = $1 AND schema_hash = $2",
        lineage.id, lineage.approved_schema_hash)
    return list(doc["columns"]) if doc else None


async def _additive_actions(conn: Conn, lineage: Lineage, added: list[str]
                            ) -> list[ColumnAction]:
    rows = await conn.fetch(
        "SELECT source_column_name, action, mirror_column_name, target_type, "
        "device_data_point_id FROM edge_column_bindings "
        "WHERE lineage_id = $1 AND schema_hash = $2",
        lineage.id, lineage.approved_schema_hash)
    kept = [ColumnAction(r["source_column_name"], ColumnActionKind(r["action"]),
                         r["mirror_column_name"], r["target_type"], r["device_data_point_id"])
            for r in rows]
    return kept + [ColumnAction(name, ColumnActionKind.MIRROR) for name in added]


async def _by_registry(conn: Conn, scope: DeviceScope, lineage: Lineage,
                       version_id: uuid.UUID, schema_hash: str,
                       columns: list[dict[str, Any]] | None,
                       classification: str) -> Lineage | None:
    """Let the registry decide (project/fleet coalescing): the approved lineage, or None
    when it must wait (paused, staging; a registry or device review is open)."""
    key = registry_key(scope, lineage)
    outcome = RegistryRoute.DEVICE_REVIEW if key is None else await route_version(
        conn, key, lineage, version_id, schema_hash, columns, classification)
    if outcome == RegistryRoute.APPROVED:
        fresh = await get_lineage_for_update(conn, lineage.id)
        assert fresh is not None
        return fresh
    if outcome == RegistryRoute.DEVICE_REVIEW:
        await open_device_review(conn, lineage.project_id, lineage.id, version_id, schema_hash,
                                 classification)
    await pause_lineage(conn, lineage, PauseReason.SCHEMA_REVIEW)
    return None


async def admit(conn: Conn, scope: DeviceScope, lineage: Lineage,
                schema_hash: str, schema_columns_json: bytes | None) -> Admission:
    if lineage.approved_schema_hash == schema_hash and lineage.status == LineageStatus.ACTIVE:
        # The live path: the lineage's approved hash is an approved version (only pending
        # versions are ever rejected), so its bindings are all that is needed.
        fill = None
        if schema_columns_json:
            fill = {"table_name": lineage.source_table,
                    "columns": orjson.loads(schema_columns_json)["columns"]}
        return Admission(lineage, target=await load_state_target(
            conn, lineage, schema_hash, fill_schema_columns=fill))
    if lineage.approved_schema_hash != schema_hash:
        await note_schema_hash(conn, lineage.id, schema_hash)
    version = await conn.fetchrow(
        "SELECT id, status, schema_columns, registry_id, classification, "
        "replay_as_schema_hash FROM edge_schema_versions "
        "WHERE lineage_id = $1 AND schema_hash = $2", lineage.id, schema_hash)
    new_cols = orjson.loads(schema_columns_json)["columns"] if schema_columns_json else None
    if version is None:
        classification, diff = classify(await _approved_columns(conn, lineage), new_cols)
        version_id = uuid.uuid4()
        await insert_version(
            conn, version_id, lineage.id, schema_hash,
            {"table_name": lineage.source_table, "columns": new_cols} if new_cols else None,
            classification, diff.as_json())
        coalesced = registry_key(scope, lineage) is not None
        auto = (not coalesced and lineage.target_table is not None and new_cols is not None
                and (classification == Classification.COMPATIBLE_MAPPED
                     or (classification == Classification.COMPATIBLE_ADDITIVE
                         and scope.policy.allow_additive_continue)))
        if coalesced:
            decided = await _by_registry(conn, scope, lineage, version_id, schema_hash,
                                         new_cols, classification)
            if decided is None:
                return Admission(lineage, staging_reason=StagingReason.SCHEMA_REVIEW)
            lineage = decided
        elif auto:
            assert new_cols is not None
            actions = await _additive_actions(conn, lineage, diff.added)
            await approve_schema(conn, lineage, version_id, schema_hash, new_cols, actions, None)
            fresh = await get_lineage_for_update(conn, lineage.id)
            assert fresh is not None
            lineage = fresh
        else:
            await open_device_review(conn, lineage.project_id, lineage.id, version_id,
                                     schema_hash, classification)
            await pause_lineage(conn, lineage, PauseReason.SCHEMA_REVIEW)
            return Admission(lineage, staging_reason=StagingReason.SCHEMA_REVIEW)
        status = SchemaStatus.APPROVED
    else:
        status = version["status"]
        if version["schema_columns"] is None and new_cols:
            await fill_columns(conn, version["id"],
                               {"table_name": lineage.source_table, "columns": new_cols})
        if status == SchemaStatus.PENDING and version["registry_id"] is not None:
            # Decided by the registry since (e.g. while this lineage was busy)?
            decided = await _by_registry(conn, scope, lineage, version["id"], schema_hash,
                                         new_cols, version["classification"])
            if decided is not None:
                lineage, status = decided, SchemaStatus.APPROVED
    if status == SchemaStatus.APPROVED and lineage.status == LineageStatus.ACTIVE:
        return Admission(lineage, target=await load_state_target(conn, lineage, schema_hash))
    if status == SchemaStatus.REJECTED:
        assert version is not None
        replay_as = version["replay_as_schema_hash"]
        if replay_as is not None and lineage.status == LineageStatus.ACTIVE:
            # An operator found it compatible (replay_rejected): written with the bindings
            # of the approved version.
            return Admission(lineage, target=await load_state_target(conn, lineage, replay_as))
        # Kept, labelled for what it is: replayable when compatible, else discardable.
        return Admission(lineage, staging_reason=StagingReason.SCHEMA_REJECTED)
    if status != SchemaStatus.APPROVED or lineage.pause_reason == PauseReason.SCHEMA_REVIEW:
        return Admission(lineage, staging_reason=StagingReason.SCHEMA_REVIEW)
    return Admission(lineage, staging_reason=StagingReason.LINEAGE_PAUSED)
