"""New devices whose schema the registry already approved: admitted many at once.

Under project or fleet coalescing, a device whose first batch carries a hash the
registry approved is approved on arrival (``_registry.route_version``). Done one lineage
at a time that takes some twenty statements; a fleet coming online (or a backlog after
an outage) brings thousands of new lineages at once. ``admit_arrivals`` does the same
for every such lineage of a group in five statements: the same schema version
(``approved``, linked to the registry entry), the same bindings, the same target.

Only the plain case goes this way — new lineages (no version, no target yet) of an
approved entry whose actions are all ``mirror`` or ``ignore`` (data point mappings
create device data points: ``approve_schema`` does that). Anything else is left to
``admit``. The caller holds the lineages' row locks; entries are read ``FOR SHARE``, as
``route_version`` does, so a registry decision in flight is waited for.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import orjson

from edgesync.fleet import DeviceScope
from edgesync.governance._bindings import _plan, insert_bindings_many, provision_target
from edgesync.governance._classify import classify
from edgesync.governance._column_actions import ColumnAction, ColumnActionKind
from edgesync.governance._lineages import Lineage, LineageStatus, set_approved_many
from edgesync.governance._registry import registry_columns, registry_key
from edgesync.governance._versions import insert_approved_many
from edgesync.store import Conn

__all__ = ["Arrival", "admit_arrivals"]

_PLAIN_ACTIONS = frozenset({ColumnActionKind.MIRROR, ColumnActionKind.IGNORE})


@dataclass(frozen=True, slots=True)
class Arrival:
    scope: DeviceScope
    lineage: Lineage
    schema_hash: str
    schema_columns_json: bytes | None


async def admit_arrivals(conn: Conn, arrivals: list[Arrival]) -> dict[uuid.UUID, Lineage]:
    """Approve every arrival the registry decided already; returns them, by lineage id,
    as they are now (approved, with their target). The others are not touched."""
    keyed = [(a, key) for a in arrivals
             if a.lineage.approved_schema_hash is None and a.lineage.target_table is None
             and a.lineage.status == LineageStatus.ACTIVE
             and (key := registry_key(a.scope, a.lineage)) is not None]
    if not keyed:
        return {}
    entries = {(r["scope_id"], r["pipeline"], r["source_table"], r["schema_hash"]): r
               for r in await conn.fetch(
                   "SELECT r.* FROM edge_schema_registry r JOIN unnest($1::uuid[], $2::text[], "
                   "$3::text[], $4::text[]) AS k(scope_id, pipeline, source_table, schema_hash) "
                   "ON r.scope_id = k.scope_id AND r.pipeline = k.pipeline "
                   "AND r.source_table = k.source_table AND r.schema_hash = k.schema_hash "
                   "WHERE r.status = 'approved' ORDER BY r.id FOR SHARE OF r",
                   [k.scope_id for _, k in keyed], [k.pipeline for _, k in keyed],
                   [k.source_table for _, k in keyed], [a.schema_hash for a, _ in keyed])}
    plans: dict[uuid.UUID, tuple[list[dict[str, Any]], list[ColumnAction], str]] = {}
    chosen: list[tuple[Arrival, Any]] = []
    for a, key in keyed:
        entry = entries.get((key.scope_id, key.pipeline, key.source_table, a.schema_hash))
        if entry is None:
            continue
        if entry["id"] not in plans:
            actions = [ColumnAction.from_json(x) for x in entry["column_actions"] or []]
            cols = await registry_columns(conn, entry["id"])
            if cols is None or not actions or any(x.action not in _PLAIN_ACTIONS
                                                  for x in actions):
                continue
            mirrors, _ = _plan(cols, actions)
            await provision_target(conn, key.pipeline, entry["target_table"], mirrors)
            plans[entry["id"]] = (cols, actions, entry["target_table"])
        chosen.append((a, entry))
    if not chosen:
        return {}
    versions = []
    bindings = []
    for a, entry in chosen:
        cols, actions, _ = plans[entry["id"]]
        by_source = {m.source: m for m in _plan(cols, actions)[0]}
        new_cols = (orjson.loads(a.schema_columns_json)["columns"]
                    if a.schema_columns_json else None)
        classification, diff = classify(None, new_cols)
        versions.append((uuid.uuid4(), a.lineage.id, a.schema_hash,
                         orjson.dumps({"table_name": a.lineage.source_table, "columns": new_cols}
                                      ).decode() if new_cols else None,
                         classification, orjson.dumps(diff.as_json()).decode(), entry["id"]))
        for act in actions:
            m = by_source.get(act.source_column_name)
            bindings.append((uuid.uuid4(), a.lineage.id, a.schema_hash, act.source_column_name,
                             act.action, m.target if m else None,
                             m.pg_type if m else act.target_type))
    await insert_approved_many(conn, versions)
    await insert_bindings_many(conn, bindings)
    return await set_approved_many(conn, [(a.lineage.id, a.schema_hash, plans[e["id"]][2])
                                          for a, e in chosen])
