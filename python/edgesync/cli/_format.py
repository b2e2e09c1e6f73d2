"""Readable output for the operator CLI: aligned tables and key/value blocks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO, Any

import orjson

__all__ = ["cell", "duration", "print_fields", "print_json", "print_table"]

_MAX_CELL = 60


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = orjson.dumps(value).decode() if isinstance(value, dict | list) else str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= _MAX_CELL else text[:_MAX_CELL - 1] + "…"


def duration(seconds: Any) -> str:
    """Seconds as a person reads them: ``0.0 s``, ``12 s``, ``3 min``, ``5 h``, ``2 d``
    (a lineage's freshness printed as ``0.031781911849975586`` before, issue 27)."""
    if not isinstance(seconds, int | float) or isinstance(seconds, bool):
        return cell(seconds)
    s = float(seconds)
    if s < 10:
        return f"{s:.1f} s"
    for limit, unit, size in ((90, "s", 1), (90 * 60, "min", 60), (48 * 3600, "h", 3600)):
        if s < limit:
            return f"{s / size:.0f} {unit}"
    return f"{s / 86400:.0f} d"


def _shown(key: str, value: Any) -> str:
    """A table cell: durations (``…_seconds``, ``…_age_s``) in their unit, the rest as is."""
    return duration(value) if key.endswith(("_seconds", "_age_s")) else cell(value)


def print_json(doc: Any, out: IO[str]) -> None:
    out.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2, default=str).decode() + "\n")


def print_table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]],
                out: IO[str], *, empty: str = "(none)") -> None:
    """``columns``: (key in each row, header). Column widths fit the widest cell."""
    if not rows:
        out.write(empty + "\n")
        return
    grid = [[header.upper() for _, header in columns]]
    grid += [[_shown(key, row.get(key)) for key, _ in columns] for row in rows]
    widths = [max(len(line[i]) for line in grid) for i in range(len(columns))]
    for line in grid:
        out.write("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
                  + "\n")


def print_fields(doc: dict[str, Any], keys: Sequence[str], out: IO[str]) -> None:
    """One ``key: value`` line per key, values aligned."""
    width = max(len(k) for k in keys) + 1
    for key in keys:
        out.write(f"{(key + ':').ljust(width)} {cell(doc.get(key))}\n")
