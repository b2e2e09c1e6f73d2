"""Column actions for ``reviews approve`` and ``registry approve``: from flags, a JSON
file, or both; and the data point references of ``--map`` (an id, or a name looked up in
the project)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from edgesync.client._client import ProjectApi
from edgesync.errors import ConfigError

__all__ = ["column_actions", "load_actions_file", "load_json_file", "resolve_map_specs",
           "suggested_by_column"]


def load_json_file(path: Path, option: str) -> Any:
    """A JSON document from a file (``-``: standard input)."""
    import sys

    try:
        raw = sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
        return orjson.loads(raw)
    except (OSError, orjson.JSONDecodeError) as exc:
        raise ConfigError(option, f"cannot read {path}: {exc}") from exc


def load_actions_file(path: Path) -> list[dict[str, Any]]:
    doc = load_json_file(path, "--actions")
    if isinstance(doc, dict):
        doc = doc.get("column_actions")
    if not isinstance(doc, list) or not all(isinstance(a, dict) for a in doc):
        raise ConfigError("--actions", "expected a JSON list of column actions")
    return doc


_ACTION_KEYS = ("source_column_name", "action", "mirror_column_name", "target_type",
                "device_data_point_id", "data_point_name")


def suggested_by_column(suggested: Sequence[dict[str, Any]] | None
                        ) -> dict[str, dict[str, Any]]:
    """A review's ``suggested_column_actions`` as column actions, by column."""
    return {str(s["source_column_name"]): {k: s[k] for k in _ACTION_KEYS
                                           if s.get(k) is not None}
            for s in suggested or []}


def column_actions(schema_columns: Sequence[str], *, actions_file: Path | None,
                   mirror: Sequence[str], ignore: Sequence[str], defer: Sequence[str],
                   map_: Sequence[str] = (), auto_map: Sequence[str] = (),
                   suggested: Sequence[dict[str, Any]] | None = None
                   ) -> list[dict[str, Any]] | None:
    """One action per column of the schema: the file's, overridden by the flags
    (``--mirror col[:name]``, ``--ignore col``, ``--defer col``, ``--map col=DATA_POINT_ID``,
    ``--auto-map col[:data point name]``); a column neither names gets its ``suggested``
    action (the review's ``suggested_column_actions``: the last approval's decisions carried
    forward), else is mirrored. The file's entries come first, in the file's order (so the
    API's ``column_actions[i]`` is the file's entry i), then the other columns in schema
    order. None (mirror everything) when neither a file, a flag nor a suggestion is given."""
    carried = suggested_by_column(suggested)
    if actions_file is None and not (mirror or ignore or defer or map_ or auto_map or carried):
        return None
    by_column: dict[str, dict[str, Any]] = {}
    if actions_file is not None:
        for entry in load_actions_file(actions_file):
            by_column[str(entry.get("source_column_name"))] = entry
    flagged: dict[str, dict[str, Any]] = {}
    for spec in mirror:
        name, _, target = spec.partition(":")
        action: dict[str, Any] = {"source_column_name": name, "action": "mirror"}
        if target:
            action["mirror_column_name"] = target
        flagged[name] = action

    def add(option: str, name: str, action: dict[str, Any]) -> None:
        if name in flagged:
            raise ConfigError(option, f"column {name!r} has more than one action")
        flagged[name] = action

    for kind, names in (("ignore", ignore), ("defer", defer)):
        for name in names:
            add(f"--{kind}", name, {"source_column_name": name, "action": kind})
    for spec in map_:
        name, point = _map_spec(spec)
        add("--map", name, {"source_column_name": name, "action": "map",
                            "device_data_point_id": point})
    for spec in auto_map:
        name, _, point_name = spec.partition(":")
        action = {"source_column_name": name, "action": "auto_create_and_map"}
        if point_name:
            action["data_point_name"] = point_name
        add("--auto-map", name, action)
    known = set(schema_columns)
    for name in flagged:
        if name not in known:
            raise ConfigError("column", f"{name!r} is not a column of this schema "
                                        f"({', '.join(schema_columns)})")
    # The file's entries keep their positions (a flag replaces an entry in place), so an
    # error the API reports as column_actions[i] names entry i of the file; the columns
    # the file does not name follow in schema order.
    ordered = [flagged.pop(name, entry) for name, entry in by_column.items()]
    for name in schema_columns:
        if name not in by_column:
            ordered.append(flagged.pop(name, carried.get(name) or {
                "source_column_name": name, "action": "mirror"}))
    return ordered + list(flagged.values())


def _map_spec(spec: str) -> tuple[str, str]:
    """``COLUMN=DATA_POINT`` as its two parts."""
    column, sep, point = spec.partition("=")
    if not sep or not point:
        raise ConfigError("--map", f"{spec!r} is not COLUMN=DATA_POINT")
    return column, point


def resolve_map_specs(api: ProjectApi, specs: list[str]) -> list[str]:
    """``COL=DATA_POINT`` with DATA_POINT an id, or a name of the project's data points."""
    out, by_name = [], None
    for spec in specs:
        column, ref = _map_spec(spec)
        try:
            uuid.UUID(ref)
        except ValueError:
            if by_name is None:
                by_name = {d["name"]: d["id"] for d in api.data_points(limit=500)["data"]}
            if ref not in by_name:
                raise ConfigError("--map", f"no data point named {ref!r} in the project "
                                           "(edgesync data-points list)") from None
            ref = by_name[ref]
        out.append(f"{column}={ref}")
    return out
