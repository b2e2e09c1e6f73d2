"""Classification of a newly seen schema against the lineage's approved one."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Classification", "SchemaDiff", "classify"]

Columns = list[dict[str, Any]]


class Classification(enum.StrEnum):
    """A new schema against the approved one (``edge_schema_versions.classification``)."""

    UNKNOWN = "unknown"  # no columns sent yet
    AMBIGUOUS = "ambiguous"  # first sight, or nothing simpler fits: a human decides
    BREAKING = "breaking"  # columns dropped, types or the primary key changed
    COMPATIBLE_ADDITIVE = "compatible_additive"  # only new nullable columns
    COMPATIBLE_MAPPED = "compatible_mapped"  # only NOT NULL flags changed


@dataclass(slots=True)
class SchemaDiff:
    added: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    type_changed: list[str] = field(default_factory=list)
    pk_changed: list[str] = field(default_factory=list)
    nullability_changed: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, list[str]]:
        return {k: list(getattr(self, k)) for k in self.__slots__}


def _by_name(columns: Columns) -> dict[str, dict[str, Any]]:
    return {str(c["name"]): c for c in columns}


def classify(approved: Columns | None, new: Columns | None
             ) -> tuple[Classification, SchemaDiff]:
    """Return ``(classification, diff)``.

    No approved schema yet → ``ambiguous`` (first sight always needs a human).
    Columns unknown (no ``schema_columns`` ever sent) → ``unknown``.
    Dropped columns, type or primary-key changes → ``breaking``.
    Only new nullable columns → ``compatible_additive``. Only NOT NULL flags changed →
    ``compatible_mapped`` (the approved bindings fit unchanged). Anything else ``ambiguous``.
    """
    diff = SchemaDiff()
    if new is None:
        return Classification.UNKNOWN, diff
    if approved is None:
        diff.added = sorted(_by_name(new))
        return Classification.AMBIGUOUS, diff
    old_cols, new_cols = _by_name(approved), _by_name(new)
    diff.added = sorted(set(new_cols) - set(old_cols))
    diff.dropped = sorted(set(old_cols) - set(new_cols))
    for name in sorted(set(old_cols) & set(new_cols)):
        o, n = old_cols[name], new_cols[name]
        if o["decl_type_affinity"] != n["decl_type_affinity"]:
            diff.type_changed.append(name)
        if o["pk_ordinal"] != n["pk_ordinal"]:
            diff.pk_changed.append(name)
        if bool(o["not_null"]) != bool(n["not_null"]):
            diff.nullability_changed.append(name)
    if any(new_cols[c]["pk_ordinal"] for c in diff.added):
        diff.pk_changed.extend(c for c in diff.added if new_cols[c]["pk_ordinal"])
    if diff.dropped or diff.type_changed or diff.pk_changed:
        return Classification.BREAKING, diff
    if diff.added and not diff.nullability_changed and not any(
        new_cols[c]["not_null"] for c in diff.added
    ):
        return Classification.COMPATIBLE_ADDITIVE, diff
    if not diff.added and diff.nullability_changed:
        # Same columns, types and key; only NOT NULL flags moved. The cloud's columns are
        # nullable anyway, so the existing bindings carry the new schema as they are.
        return Classification.COMPATIBLE_MAPPED, diff
    return Classification.AMBIGUOUS, diff
