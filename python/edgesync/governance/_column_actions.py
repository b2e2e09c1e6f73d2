"""Column actions: what an operator (or a policy, or a registry decision) chose for each
column of a schema: ``mirror``, ``map``, ``ignore``, ``defer``, ``auto_create_and_map``.

Its own module because bindings (``_bindings``) and data-point mapping (``_mapping``)
both work on it: kept in either, the two imported each other.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from typing import Any

from edgesync.errors import InvalidRequestError
from edgesync.materialize import PG_TYPES

__all__ = ["ACTIONS", "MAP_ACTIONS", "ColumnAction", "ColumnActionKind", "mirror_all_actions"]


class ColumnActionKind(enum.StrEnum):
    """What is done with a column (``edge_bindings.action``, ``column_actions[].action``)."""

    MIRROR = "mirror"  # a column of the target table (mirror_column_name renames it)
    MAP = "map"  # values to an existing data point (device_data_point_id)
    IGNORE = "ignore"  # dropped
    DEFER = "defer"  # decided later: the lineage stays paused (deferred_columns)
    AUTO_CREATE_AND_MAP = "auto_create_and_map"  # a data point created at approval


ACTIONS = tuple(ColumnActionKind)
MAP_ACTIONS = (ColumnActionKind.MAP, ColumnActionKind.AUTO_CREATE_AND_MAP)


@dataclass(frozen=True, slots=True)
class ColumnAction:
    source_column_name: str
    action: ColumnActionKind
    mirror_column_name: str | None = None
    target_type: str | None = None
    # map: the data point (required); auto_create_and_map: set once the data point is
    # created (a registry decision hands it on to every device that follows).
    device_data_point_id: uuid.UUID | None = None
    data_point_name: str | None = None

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
        if mirror is not None and action != ColumnActionKind.MIRROR:
            raise InvalidRequestError(f"{where}.mirror_column_name", "only for action mirror")
        kind = ColumnActionKind(action)
        return cls(name, kind, mirror, target_type, _data_point_id(raw, where, kind),
                   _data_point_name(raw, where, kind))

    def as_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"source_column_name": self.source_column_name,
                               "action": self.action,
                               "mirror_column_name": self.mirror_column_name,
                               "target_type": self.target_type}
        if self.action in MAP_ACTIONS:
            doc["device_data_point_id"] = (str(self.device_data_point_id)
                                           if self.device_data_point_id else None)
            doc["data_point_name"] = self.data_point_name
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ColumnAction:
        """A stored decision (``as_json``), trusted: no policy check again."""
        dp = doc.get("device_data_point_id")
        return cls(doc["source_column_name"], ColumnActionKind(doc["action"]),
                   doc.get("mirror_column_name"),
                   doc.get("target_type"), uuid.UUID(dp) if dp else None,
                   doc.get("data_point_name"))


def _data_point_id(raw: dict[str, Any], where: str, action: str) -> uuid.UUID | None:
    value = raw.get("device_data_point_id")
    if action != ColumnActionKind.MAP:
        if value is not None:
            raise InvalidRequestError(f"{where}.device_data_point_id", "only for action map")
        return None
    if value is None:
        raise InvalidRequestError(f"{where}.device_data_point_id", "required for action map")
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except ValueError as exc:
        raise InvalidRequestError(f"{where}.device_data_point_id", "must be a UUID") from exc


def _data_point_name(raw: dict[str, Any], where: str, action: str) -> str | None:
    value = raw.get("data_point_name")
    if value is None:
        return None
    if action != ColumnActionKind.AUTO_CREATE_AND_MAP:
        raise InvalidRequestError(f"{where}.data_point_name", "only for auto_create_and_map")
    if not isinstance(value, str) or not 1 <= len(value) <= 200:
        raise InvalidRequestError(f"{where}.data_point_name", "a string of 1 to 200 characters")
    return value


def mirror_all_actions(columns: list[dict[str, Any]]) -> list[ColumnAction]:
    return [ColumnAction(str(c["name"]), ColumnActionKind.MIRROR) for c in columns]
