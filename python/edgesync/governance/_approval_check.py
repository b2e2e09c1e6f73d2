"""Would an approval with these column actions pass, and if not, why, column by column.

One function (``check_approval``) answers both the preview and the approval of a device or
registry review, so a preview can never show as fine what the approval then refuses (a
column retyped onto a target column of another type was the case: the preview only checked
the actions' shape, the approval also the table). Each problem is a ``Refusal`` naming the
source column, a stable ``RefusalCode``, what is wrong and how to fix it; an approval with
any refusal raises a ``ConflictError`` or ``InvalidRequestError`` carrying all of them
(``refusals_of``), and changes nothing.

The same check also says which target columns the approval stops writing (``retired``):
the columns the lineage's approved bindings mirror into the same table that the new
actions no longer do.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, cast

from edgesync.errors import ConflictError, IdentifierError, InvalidRequestError, RequestError
from edgesync.fleet import ProjectPolicy
from edgesync.governance._column_actions import ColumnAction, ColumnActionKind
from edgesync.governance._mapping import value_type_for
from edgesync.materialize import (
    TS_PLATFORM_COLUMNS,
    MirrorColumn,
    check_column_name,
    pg_type_for,
)
from edgesync.protocol import Pipeline
from edgesync.store import Conn

__all__ = ["ApprovalCheck", "Refusal", "RefusalCode", "RetiredColumn", "check_approval",
           "free_name", "plan_actions", "previous_mirrors", "refusals_of", "refused",
           "target_types",
           "type_suffix"]

# The action of an entry that could not be parsed (refused): it holds the entry's place
# in column_actions, and is no ColumnActionKind, so no step takes it for one.
_INVALID = cast(ColumnActionKind, "invalid")


class RefusalCode(StrEnum):
    INVALID_ACTION = "invalid_action"  # the action's own fields do not fit it
    NOT_A_COLUMN = "not_a_column"
    DUPLICATE_ACTION = "duplicate_action"
    MISSING_ACTION = "missing_action"
    INVALID_NAME = "invalid_name"
    NAME_TAKEN = "name_taken"  # two columns mirrored under one name
    RESERVED_NAME = "reserved_name"
    TYPE_CONFLICT = "type_conflict"  # the target has the column with another type
    DATA_POINT_NOT_FOUND = "data_point_not_found"
    AUTO_CREATE_NOT_ALLOWED = "auto_create_not_allowed"
    DATA_POINT_TYPE_CONFLICT = "data_point_type_conflict"
    DEFER_NOT_ALLOWED = "defer_not_allowed"


# Refused because of what exists (a table column, a data point): a 409, as before; every
# other refusal is about the request itself: a 422.
_CONFLICTS = frozenset({RefusalCode.TYPE_CONFLICT, RefusalCode.DATA_POINT_TYPE_CONFLICT})

# A short word per PostgreSQL type, for names proposed beside a column of another type.
_SUFFIX = {"bigint": "int", "double precision": "real", "numeric": "num", "text": "text",
           "bytea": "blob", "boolean": "bool", "jsonb": "json"}


@dataclass(frozen=True, slots=True)
class Refusal:
    source_column_name: str | None  # None: about the actions as a whole
    code: RefusalCode
    detail: str
    fix: str
    field: str  # the request part, as a 422's ``field`` names it

    @property
    def conflict(self) -> bool:
        return self.code in _CONFLICTS

    def as_json(self) -> dict[str, Any]:
        return {"source_column_name": self.source_column_name, "code": str(self.code),
                "detail": self.detail, "fix": self.fix, "field": self.field}


class _RefusedConflict(ConflictError):
    refusals: list[Refusal]


class _RefusedInvalid(InvalidRequestError):
    refusals: list[Refusal]


def refused(refusals: list[Refusal]) -> RequestError:
    """The error of a refused approval: a ``ConflictError`` when the first refusal is about
    what exists (a column of another type), else an ``InvalidRequestError`` on its field
    (the errors an approval raised before); either carries every refusal (``refusals_of``)."""
    first = refusals[0]
    missing = [r.source_column_name for r in refusals if r.code == RefusalCode.MISSING_ACTION]
    detail = (f"no action for column(s) {', '.join(map(repr, missing))}"
              if first.code == RefusalCode.MISSING_ACTION else first.detail)
    exc: _RefusedConflict | _RefusedInvalid
    if first.conflict:
        exc = _RefusedConflict(f"{detail}; {first.fix}")
    else:
        exc = _RefusedInvalid(first.field, detail)
    exc.refusals = refusals
    return exc


def refusals_of(exc: BaseException) -> list[Refusal] | None:
    """Every refusal of a refused approval's error (``refused``), else None."""
    if isinstance(exc, _RefusedConflict | _RefusedInvalid):
        return exc.refusals
    return None


@dataclass(frozen=True, slots=True)
class RetiredColumn:
    """A target column the lineage's approved bindings write and the new ones do not."""

    name: str
    pg_type: str
    source_column_name: str


@dataclass(slots=True)
class ApprovalCheck:
    actions: list[ColumnAction]  # the actions that parsed
    mirrors: list[MirrorColumn]
    refusals: list[Refusal] = field(default_factory=list)
    retired: list[RetiredColumn] = field(default_factory=list)


def type_suffix(pg_type: str) -> str:
    return _SUFFIX.get(pg_type, "new")


def free_name(base: str, taken: set[str]) -> str:
    """``base``, or ``base_2``, ``base_3``… the first not in ``taken``."""
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    return name


async def target_types(conn: Conn, table: str) -> dict[str, str]:
    """The columns of ``table`` and their types (empty when it does not exist yet)."""
    rows = await conn.fetch(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS t FROM pg_attribute a "
        "WHERE a.attrelid = to_regclass(quote_ident($1)) AND a.attnum > 0 "
        "AND NOT a.attisdropped", table)
    return {r["attname"]: r["t"] for r in rows}


async def previous_mirrors(conn: Conn, lineage_ids: list[uuid.UUID], table: str
                            ) -> list[tuple[str, str, str]]:
    """``(target, type, source)`` the approved bindings of these lineages mirror into
    ``table`` (their current target)."""
    rows = await conn.fetch(
        "SELECT DISTINCT b.mirror_column_name, b.target_type, b.source_column_name "
        "FROM edge_table_lineages l JOIN edge_column_bindings b ON b.lineage_id = l.id "
        "AND b.schema_hash = l.approved_schema_hash WHERE l.id = ANY($1::uuid[]) "
        "AND l.target_table = $2 AND b.action = 'mirror' AND b.mirror_column_name IS NOT NULL "
        "ORDER BY 1", lineage_ids, table)
    return [(r["mirror_column_name"], r["target_type"] or "text", r["source_column_name"])
            for r in rows]


def _parse(raw_actions: list[dict[str, Any]], refusals: list[Refusal]) -> list[ColumnAction]:
    out = []
    for i, raw in enumerate(raw_actions):
        try:
            out.append(ColumnAction.parse(raw, i))
        except InvalidRequestError as exc:
            name = raw.get("source_column_name") if isinstance(raw, dict) else None
            refusals.append(Refusal(name if isinstance(name, str) else None,
                                    RefusalCode.INVALID_ACTION, exc.reason,
                                    f"correct {exc.field}", exc.field))
            out.append(ColumnAction("", _INVALID))  # keeps positions: column_actions[i]
    return out


def plan_actions(columns: list[dict[str, Any]], actions: list[ColumnAction], *,
                 pipeline: str | None, registry: bool
                 ) -> tuple[list[MirrorColumn], list[Refusal]]:
    """The rules of column actions that need no database: one action per column of the
    schema, valid and distinct target names (not reserved: in telemetry targets when
    ``pipeline`` is given), no defer at registry scope. The mirrored columns they make,
    and every refusal. ``approve_schema`` applies the same (``_bindings._plan``)."""
    known = {str(c["name"]): c for c in columns}
    refusals: list[Refusal] = []
    seen: set[str] = set()
    targets: dict[str, str] = {}
    mirrors: list[MirrorColumn] = []
    for i, act in enumerate(actions):
        where = f"column_actions[{i}]"
        name = act.source_column_name
        if act.action == _INVALID:  # refused when parsed
            continue

        def refuse(code: RefusalCode, detail: str, fix: str, part: str,
                   name: str = name, where: str = where) -> None:
            refusals.append(Refusal(name, code, detail, fix, f"{where}{part}"))

        if name not in known:
            refuse(RefusalCode.NOT_A_COLUMN, f"{name!r} is not a column of this schema",
                   f"use one of {', '.join(known)}", ".source_column_name")
            continue
        if name in seen:
            refuse(RefusalCode.DUPLICATE_ACTION, f"{name!r} has more than one action",
                   "keep one action for the column", ".source_column_name")
            continue
        seen.add(name)
        if act.action == ColumnActionKind.DEFER and registry:
            refuse(RefusalCode.DEFER_NOT_ALLOWED, "defer is for device reviews; a registry "
                   "decision binds every column", "mirror, map or ignore it", ".action")
        if act.action != ColumnActionKind.MIRROR:
            continue
        try:
            target = check_column_name(act.mirror_column_name or name,
                                       field=f"{where}.mirror_column_name")
        except IdentifierError as exc:
            refuse(RefusalCode.INVALID_NAME, str(exc),
                   f"give it another mirror_column_name (e.g. {name}_value)",
                   ".mirror_column_name")
            continue
        if target in targets:
            refuse(RefusalCode.NAME_TAKEN, f"{target!r} is used by another column "
                   f"({targets[target]})", "give one of them another mirror_column_name",
                   ".mirror_column_name")
            continue
        targets[target] = name
        if pipeline == Pipeline.TELEMETRY and target in TS_PLATFORM_COLUMNS:
            refuse(RefusalCode.RESERVED_NAME, f"column {target!r} is reserved in "
                   "telemetry targets", f"give it a mirror_column_name (e.g. {name}_value)",
                   ".mirror_column_name")
            continue
        affinity = str(known[name]["decl_type_affinity"])
        mirrors.append(MirrorColumn(name, target, act.target_type or pg_type_for(affinity)))
    refused_names = {r.source_column_name for r in refusals}
    refusals += [Refusal(name, RefusalCode.MISSING_ACTION, f"no action for column {name!r}",
                         "give it an action (mirror, map, ignore…)", "column_actions")
                 for name in known if name not in seen and name not in refused_names]
    return mirrors, refusals


async def _data_point_refusals(conn: Conn, project_id: uuid.UUID,
                               columns: list[dict[str, Any]], actions: list[ColumnAction]
                               ) -> list[Refusal]:
    """``map`` and ``auto_create_and_map`` against the project's data points and policy
    (what ``_mapping.resolve_mapped`` would refuse at approval), read only."""
    affinity = {str(c["name"]): str(c["decl_type_affinity"]) for c in columns}
    refusals: list[Refusal] = []
    allowed: bool | None = None
    for i, act in enumerate(actions):
        name, where = act.source_column_name, f"column_actions[{i}]"
        if name not in affinity:
            continue
        if act.action == ColumnActionKind.MAP:
            vt = await conn.fetchval(
                "SELECT value_type FROM edge_device_data_points WHERE id = $1 "
                "AND project_id = $2", act.device_data_point_id, project_id)
            if vt is None:
                refusals.append(Refusal(
                    name, RefusalCode.DATA_POINT_NOT_FOUND,
                    f"no data point {act.device_data_point_id} in this project",
                    "choose a data point of this project (GET …/edge/data-points)",
                    f"{where}.device_data_point_id"))
        elif act.action == ColumnActionKind.AUTO_CREATE_AND_MAP:
            if allowed is None:
                policy = await conn.fetchval("SELECT policy FROM edge_projects WHERE id = $1",
                                             project_id)
                allowed = ProjectPolicy.from_stored(policy).allow_auto_create_device_data_points
            if not allowed:
                refusals.append(Refusal(
                    name, RefusalCode.AUTO_CREATE_NOT_ALLOWED, "auto_create_and_map needs "
                    "project policy allow_auto_create_device_data_points = true",
                    "map it to an existing data point, or change the policy", f"{where}.action"))
                continue
            point = act.data_point_name or name
            vt = value_type_for(act.target_type or pg_type_for(affinity[name]))
            have = await conn.fetchval(
                "SELECT value_type FROM edge_device_data_points WHERE project_id = $1 "
                "AND name = $2", project_id, point)
            if have is not None and have != vt:
                refusals.append(Refusal(
                    name, RefusalCode.DATA_POINT_TYPE_CONFLICT,
                    f"data point {point!r} exists with value type {have}, not {vt}",
                    "map to it explicitly or choose another data_point_name", f"{where}.action"))
    return refusals


async def check_approval(conn: Conn, *, project_id: uuid.UUID, pipeline: str, table: str,
                         columns: list[dict[str, Any]],
                         column_actions: list[dict[str, Any]] | None, registry: bool,
                         lineage_ids: list[uuid.UUID]) -> ApprovalCheck:
    """Check ``column_actions`` (None: mirror every column) for the schema ``columns``
    against the target ``table`` as it is, the project's data points and policy; nothing is
    written. ``lineage_ids``: the lineages the approval re-binds (for ``retired``)."""
    refusals: list[Refusal] = []
    if column_actions is None:
        parsed = [ColumnAction(str(c["name"]), ColumnActionKind.MIRROR) for c in columns]
    else:
        parsed = _parse(column_actions, refusals)
    mirrors, planned = plan_actions(columns, parsed, pipeline=pipeline, registry=registry)
    refusals += planned
    refusals += await _data_point_refusals(conn, project_id, columns, parsed)
    existing = await target_types(conn, table)
    targets = {m.target for m in mirrors}
    # What exists last: a 422 about the request itself comes first, as before.
    taken = set(existing) | targets
    for m in mirrors:
        if m.target in existing and existing[m.target] != m.pg_type:
            other = free_name(f"{m.target}_{type_suffix(m.pg_type)}", taken)
            i = next(i for i, a in enumerate(parsed) if a.source_column_name == m.source)
            refusals.append(Refusal(
                m.source, RefusalCode.TYPE_CONFLICT,
                f"{table}.{m.target} already exists as {existing[m.target]}, not {m.pg_type}",
                f"choose another mirror_column_name (e.g. {other}) or target_type "
                f"{existing[m.target]} (if its values still fit), or ignore the column",
                f"column_actions[{i}].mirror_column_name"))
    new_targets = {m.target for m in mirrors}
    retired = [RetiredColumn(t, existing.get(t, typ), src)
               for t, typ, src in await previous_mirrors(conn, lineage_ids, table)
               if t not in new_targets]
    return ApprovalCheck([a for a in parsed if a.action != _INVALID], mirrors, refusals,
                         retired)
