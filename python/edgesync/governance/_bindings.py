"""Column bindings: what an approved schema's columns become in the cloud.

``approve_schema`` is the one durable step shared by an operator's approval and
a policy auto-approval: provision the target, store bindings, schedule replay,
mark the version approved, and re-activate the lineage, all in the caller's
transaction, so a crash at any point leaves either all of it or none.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from edgesync.errors import ConflictError, IdentifierError, InvalidRequestError
from edgesync.governance._lineages import Lineage, resume_lineage
from edgesync.materialize import (
    PG_TYPES,
    TS_PLATFORM_COLUMNS,
    MirrorColumn,
    StateTarget,
    TsTarget,
    check_column_name,
    pg_type_for,
    target_table_name,
    ts_table_name,
)
from edgesync.store import Conn

__all__ = ["REPLAY_CHANNEL", "ColumnAction", "approve_schema", "load_state_target",
           "mirror_all_actions"]

REPLAY_CHANNEL = "edge_replay"
ACTIONS = ("mirror", "map", "ignore", "defer", "auto_create_and_map")


@dataclass(frozen=True, slots=True)
class ColumnAction:
    source_column_name: str
    action: str
    mirror_column_name: str | None = None
    target_type: str | None = None

    @classmethod
    def parse(cls, raw: dict[str, Any], index: int) -> ColumnAction:
        where = f"column_actions[{index}]"
        name = raw.get("source_column_name")
        if not isinstance(name, str) or not name:
            raise InvalidRequestError(f"{where}.source_column_name", "required string")
        action = raw.get("action")
        if action not in ACTIONS:
            raise InvalidRequestError(f"{where}.action", f"must be one of {', '.join(ACTIONS)}")
        target_type = raw.get("target_type")
        if target_type is not None and target_type not in PG_TYPES:
            raise InvalidRequestError(f"{where}.target_type",
                                      f"must be one of {', '.join(sorted(PG_TYPES))}")
        mirror = raw.get("mirror_column_name")
        if mirror is not None and not isinstance(mirror, str):
            raise InvalidRequestError(f"{where}.mirror_column_name", "must be a string")
        return cls(name, action, mirror, target_type)


def mirror_all_actions(columns: list[dict[str, Any]]) -> list[ColumnAction]:
    return [ColumnAction(str(c["name"]), "mirror") for c in columns]


def state_prefix(device_id: uuid.UUID) -> str:
    return f"edge_state_{device_id.hex[:8]}_"


async def load_state_target(conn: Conn, lineage: Lineage, schema_hash: str
                            ) -> StateTarget | None:
    """The target and mirrored columns for batches of an approved schema hash."""
    if lineage.target_table is None:
        return None
    rows = await conn.fetch(
        "SELECT source_column_name, mirror_column_name, target_type FROM edge_column_bindings "
        "WHERE lineage_id = $1 AND schema_hash = $2 AND action = 'mirror' ORDER BY id",
        lineage.id, schema_hash)
    cols = [MirrorColumn(r["source_column_name"], r["mirror_column_name"], r["target_type"])
            for r in rows]
    return StateTarget(lineage.target_table, cols,
                       cloud_authoritative=lineage.sync_authority == "cloud_authoritative")


def _plan(columns: list[dict[str, Any]], actions: list[ColumnAction]
          ) -> tuple[list[MirrorColumn], list[ColumnAction]]:
    known = {str(c["name"]): c for c in columns}
    seen: set[str] = set()
    targets: set[str] = set()
    mirrors: list[MirrorColumn] = []
    for i, act in enumerate(actions):
        where = f"column_actions[{i}]"
        if act.source_column_name not in known:
            raise InvalidRequestError(f"{where}.source_column_name",
                                      f"{act.source_column_name!r} is not a column of this schema")
        if act.source_column_name in seen:
            raise InvalidRequestError(f"{where}.source_column_name",
                                      f"{act.source_column_name!r} has more than one action")
        seen.add(act.source_column_name)
        if act.action in ("map", "auto_create_and_map"):
            raise InvalidRequestError(
                f"{where}.action",
                f"{act.action!r} needs device data points, which this server does not have yet")
        if act.action != "mirror":
            continue
        try:
            target = check_column_name(act.mirror_column_name or act.source_column_name,
                                       field=f"{where}.mirror_column_name")
        except IdentifierError as exc:
            raise InvalidRequestError(f"{where}.mirror_column_name", str(exc)) from exc
        if target in targets:
            raise InvalidRequestError(f"{where}.mirror_column_name",
                                      f"{target!r} is used by another column")
        targets.add(target)
        affinity = str(known[act.source_column_name]["decl_type_affinity"])
        mirrors.append(MirrorColumn(act.source_column_name, target,
                                    act.target_type or pg_type_for(affinity)))
    missing = sorted(set(known) - seen)
    if missing:
        raise InvalidRequestError("column_actions",
                                  f"no action for column(s) {', '.join(map(repr, missing))}")
    return mirrors, actions


async def _check_existing_types(conn: Conn, table: str,
                                mirrors: list[MirrorColumn]) -> None:
    rows = await conn.fetch(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS t FROM pg_attribute a "
        "WHERE a.attrelid = to_regclass(quote_ident($1)) AND a.attnum > 0 AND NOT a.attisdropped",
        table)
    existing = {r["attname"]: r["t"] for r in rows}
    for m in mirrors:
        if m.target in existing and existing[m.target] != m.pg_type:
            raise ConflictError(
                f"{table}.{m.target} already exists as {existing[m.target]}, not {m.pg_type}; "
                "choose another mirror_column_name or target_type")


async def approve_schema(conn: Conn, lineage: Lineage, version_id: uuid.UUID,
                         schema_hash: str, columns: list[dict[str, Any]],
                         actions: list[ColumnAction], review_id: uuid.UUID | None) -> bool:
    """Apply an approval; returns whether the lineage is active afterwards."""
    mirrors, _ = _plan(columns, actions)
    if lineage.pipeline == "telemetry":
        # Telemetry targets are coalesced per project: shared by design, no owner check.
        table = lineage.target_table or ts_table_name(lineage.project_id, lineage.source_table)
        for mc in mirrors:
            if mc.target in TS_PLATFORM_COLUMNS:
                raise InvalidRequestError("column_actions", f"column {mc.target!r} is reserved "
                                          "in telemetry targets; give it a mirror_column_name")
        await _check_existing_types(conn, table, mirrors)
        await TsTarget(table, mirrors).provision(conn)
    else:
        table = lineage.target_table or target_table_name(state_prefix(lineage.device_id),
                                                          lineage.source_table)
        owner = await conn.fetchval(
            "SELECT id FROM edge_table_lineages WHERE target_table = $1 AND id <> $2",
            table, lineage.id)
        if owner is not None:
            raise ConflictError(f"target table {table} already belongs to lineage {owner}")
        await _check_existing_types(conn, table, mirrors)
        await StateTarget(table, mirrors).provision(conn)
    by_source = {m.source: m for m in mirrors}
    for act in actions:
        m = by_source.get(act.source_column_name)
        await conn.execute(
            "INSERT INTO edge_column_bindings (id, lineage_id, schema_hash, source_column_name, "
            "action, mirror_column_name, target_type) VALUES ($1, $2, $3, $4, $5, $6, $7) "
            "ON CONFLICT (lineage_id, schema_hash, source_column_name) DO UPDATE SET "
            "action = EXCLUDED.action, mirror_column_name = EXCLUDED.mirror_column_name, "
            "target_type = EXCLUDED.target_type",
            uuid.uuid4(), lineage.id, schema_hash, act.source_column_name, act.action,
            m.target if m else None, m.pg_type if m else None)
    await conn.execute("UPDATE edge_schema_versions SET status = 'approved' WHERE id = $1",
                       version_id)
    await conn.execute(
        "UPDATE edge_table_lineages SET approved_schema_hash = $2, target_table = $3, "
        "updated_at = now() WHERE id = $1", lineage.id, schema_hash, table)
    await conn.execute(
        "INSERT INTO edge_replay_intents (id, lineage_id, review_id) VALUES ($1, $2, $3)",
        uuid.uuid4(), lineage.id, review_id)
    await conn.execute("SELECT pg_notify($1, $2)", REPLAY_CHANNEL, str(lineage.id))
    deferred = any(a.action == "defer" for a in actions)
    if not deferred and lineage.pause_reason in ("schema_review", None):
        await resume_lineage(conn, lineage)
        return True
    return lineage.status == "active"
