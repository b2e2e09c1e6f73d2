"""Suggested column actions for a new review: the decisions already made carry forward.

A lineage's next review (or the next registry review of a coalesced target) starts from
the previous approved version's decisions instead of "mirror every column under its own
name": the same mirror names, ignored columns still ignored, mapped columns still mapped,
the type kept where the column's affinity did not change. A column that is new gets a
proposal (mirrored under its own name, or beside a target column of another type); a column
whose affinity changed needs the operator (its old target column holds another type).
Each suggestion says which (``SuggestionKind``) and why.

Suggestions are advice read with the review: approving without ``column_actions`` still
mirrors every column (docs/api.md); the console, TUI and CLI send them as the defaults.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from edgesync.governance._approval_check import free_name, target_types, type_suffix
from edgesync.governance._bindings import device_target
from edgesync.governance._column_actions import MAP_ACTIONS, ColumnAction, ColumnActionKind
from edgesync.governance._lineages import Lineage
from edgesync.governance._registry import coalesced_table_name, registry_columns
from edgesync.materialize import pg_type_for
from edgesync.store import Conn

__all__ = ["Suggestion", "SuggestionKind", "suggest", "suggest_for_registry_review",
           "suggest_for_review"]


class SuggestionKind(StrEnum):
    CARRIED = "carried"  # the previous approval's decision, unchanged
    NEW = "new"  # a column the previous approval did not have
    NEEDS_DECISION = "needs_decision"  # a proposal the operator should look at


@dataclass(frozen=True, slots=True)
class Suggestion:
    action: ColumnAction
    kind: SuggestionKind
    reason: str

    def as_json(self) -> dict[str, Any]:
        doc = self.action.as_json()
        if doc["action"] in MAP_ACTIONS and doc.get("device_data_point_id"):
            doc.pop("data_point_name", None)  # the point exists: map it, do not create it
            doc["action"] = ColumnActionKind.MAP
        return {**doc, "suggestion": str(self.kind), "reason": self.reason}


def _affinity(column: dict[str, Any] | None) -> str | None:
    return str(column["decl_type_affinity"]).upper() if column else None


def suggest(columns: list[dict[str, Any]], previous_columns: list[dict[str, Any]] | None,
            previous: list[ColumnAction] | None, existing: dict[str, str]
            ) -> list[Suggestion]:
    """One suggestion per column of ``columns`` (schema order), from the previous approved
    ``previous`` actions for ``previous_columns``, against the target's ``existing`` column
    types (empty before the first approval)."""
    before = {a.source_column_name: a for a in previous or []}
    old_cols = {str(c["name"]): c for c in previous_columns or []}
    taken = set(existing)
    out: list[Suggestion] = []
    for c in columns:
        name = str(c["name"])
        pg_type = pg_type_for(str(c["decl_type_affinity"]))
        prev = before.get(name)
        if prev is None:
            out.append(_new(name, pg_type, existing, taken, first=previous is None))
            continue
        same = _affinity(old_cols.get(name)) in (None, _affinity(c))
        if prev.action == ColumnActionKind.IGNORE:
            out.append(Suggestion(ColumnAction(name, ColumnActionKind.IGNORE),
                                  SuggestionKind.CARRIED,
                                  "ignored at the last approval: still ignored"))
        elif prev.action == ColumnActionKind.DEFER:
            target = free_name(name, taken) if existing.get(name, pg_type) != pg_type else name
            taken.add(target)
            out.append(Suggestion(ColumnAction(name, ColumnActionKind.MIRROR,
                                               None if target == name else target),
                                  SuggestionKind.NEEDS_DECISION,
                                  "deferred at the last approval: decide it now"))
        elif prev.action != ColumnActionKind.MIRROR:
            out.append(Suggestion(
                prev, SuggestionKind.CARRIED if same else SuggestionKind.NEEDS_DECISION,
                "mapped to the same data point as at the last approval" if same else
                f"type changed from {_affinity(old_cols.get(name))} to {_affinity(c)}: "
                "check the data point's value type"))
        else:
            out.append(_mirror(name, prev, pg_type, same, _affinity(old_cols.get(name)),
                               _affinity(c), existing, taken))
    return out


def _new(name: str, pg_type: str, existing: dict[str, str], taken: set[str], *,
         first: bool) -> Suggestion:
    if existing.get(name, pg_type) == pg_type:
        taken.add(name)
        return Suggestion(ColumnAction(name, ColumnActionKind.MIRROR), SuggestionKind.NEW,
                          "first review: mirrored under its own name" if first
                          else "new column: mirrored under its own name")
    target = free_name(f"{name}_{type_suffix(pg_type)}", taken)
    taken.add(target)
    return Suggestion(ColumnAction(name, ColumnActionKind.MIRROR, target),
                      SuggestionKind.NEEDS_DECISION,
                      f"new column, but the target's {name} is {existing[name]}, not "
                      f"{pg_type}: proposed {target}")


def _mirror(name: str, prev: ColumnAction, pg_type: str, same: bool, old: str | None,
            new: str | None, existing: dict[str, str], taken: set[str]) -> Suggestion:
    target = prev.mirror_column_name or name
    if same:
        taken.add(target)
        # The stored binding names the type it chose; only a type the operator picked
        # (not the affinity's own) is sent again.
        kept = prev.target_type if prev.target_type not in (None, pg_type) else None
        return Suggestion(ColumnAction(name, ColumnActionKind.MIRROR,
                                       None if target == name else target, kept),
                          SuggestionKind.CARRIED,
                          f"mirrored as {target} at the last approval" if target != name
                          else "mirrored at the last approval")
    if existing.get(target, pg_type) == pg_type:
        taken.add(target)
        return Suggestion(ColumnAction(name, ColumnActionKind.MIRROR,
                                       None if target == name else target),
                          SuggestionKind.NEEDS_DECISION,
                          f"type changed from {old} to {new}; {target} can hold it")
    other = free_name(f"{target}_{type_suffix(pg_type)}", taken)
    taken.add(other)
    return Suggestion(ColumnAction(name, ColumnActionKind.MIRROR, other),
                      SuggestionKind.NEEDS_DECISION,
                      f"type changed from {old} to {new}: {target} holds "
                      f"{existing[target]}, so it goes to {other} (or ignore it, or choose "
                      "another name)")


async def _approved_version(conn: Conn, lineage: Lineage
                            ) -> tuple[list[dict[str, Any]] | None, list[ColumnAction]] | None:
    if lineage.approved_schema_hash is None:
        return None
    cols = await conn.fetchval(
        "SELECT schema_columns FROM edge_schema_versions WHERE lineage_id = $1 "
        "AND schema_hash = $2", lineage.id, lineage.approved_schema_hash)
    rows = await conn.fetch(
        "SELECT source_column_name, action, mirror_column_name, target_type, "
        "device_data_point_id FROM edge_column_bindings WHERE lineage_id = $1 "
        "AND schema_hash = $2 ORDER BY id", lineage.id, lineage.approved_schema_hash)
    actions = [ColumnAction(r["source_column_name"], ColumnActionKind(r["action"]),
                            r["mirror_column_name"], r["target_type"], r["device_data_point_id"])
               for r in rows]
    return (cols or {}).get("columns"), actions


async def suggest_for_review(conn: Conn, lineage_id: uuid.UUID,
                             columns: list[dict[str, Any]]) -> list[Suggestion]:
    """Suggestions for a device review of ``columns`` on the lineage."""
    row = await conn.fetchrow("SELECT * FROM edge_table_lineages WHERE id = $1", lineage_id)
    if row is None or not columns:
        return []
    lineage = Lineage.from_record(row)
    approved = await _approved_version(conn, lineage)
    existing = await target_types(conn, device_target(lineage))
    if approved is None:
        return suggest(columns, None, None, existing)
    return suggest(columns, approved[0], approved[1], existing)


async def suggest_for_registry_review(conn: Conn, registry_id: uuid.UUID
                                      ) -> list[Suggestion]:
    """Suggestions for a registry review: from the scope's latest approved entry of the
    same table and pipeline (the coalesced target's last decision)."""
    entry = await conn.fetchrow("SELECT * FROM edge_schema_registry WHERE id = $1",
                                registry_id)
    columns = await registry_columns(conn, registry_id)
    if entry is None or not columns:
        return []
    table = coalesced_table_name(entry["pipeline"], entry["scope"],
                                 entry["fleet_id"] or entry["project_id"],
                                 entry["source_table"])
    prev = await conn.fetchrow(
        "SELECT id, column_actions FROM edge_schema_registry WHERE scope_id = $1 "
        "AND pipeline = $2 AND source_table = $3 AND status = 'approved' AND id <> $4 "
        "AND column_actions IS NOT NULL ORDER BY updated_at DESC LIMIT 1",
        entry["scope_id"], entry["pipeline"], entry["source_table"], registry_id)
    existing = await target_types(conn, table)
    if prev is None:
        return suggest(columns, None, None, existing)
    return suggest(columns, await registry_columns(conn, prev["id"]),
                   [ColumnAction.from_json(a) for a in prev["column_actions"]], existing)
