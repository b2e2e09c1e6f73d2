"""The vocabulary enums and the database agree: each enum's values are exactly those the
column's CHECK constraint allows (read from the migrations), so a new value cannot be
added on one side only."""

from __future__ import annotations

import enum
import re
from pathlib import Path

import pytest

from edgesync import governance, store

_MIGRATIONS = Path(store.__file__).resolve().parent / "migrations"


def _checked_values(table: str, column: str) -> set[str]:
    """The values of ``CHECK (column IN (...))`` in ``CREATE TABLE table``."""
    found: list[set[str]] = []
    for path in sorted(_MIGRATIONS.glob("*.sql")):
        sql = path.read_text()
        for m in re.finditer(rf"CREATE TABLE (?:IF NOT EXISTS )?{table} \((.*?)\n\);", sql,
                             re.DOTALL):
            check = re.search(rf"CHECK \({column} IN\s*\(([^)]*)\)\)", m.group(1))
            if check:
                found.append(set(re.findall(r"'([a-z_]+)'", check.group(1))))
    assert len(found) == 1, f"{table}.{column}: {len(found)} CHECK constraints found"
    return found[0]


@pytest.mark.parametrize("enum_type, table, column", [
    (governance.LineageStatus, "edge_table_lineages", "status"),
    (governance.StagingReason, "edge_staged_rows", "staging_reason"),
    (governance.ReviewStatus, "edge_schema_reviews", "status"),
    (governance.ReviewStatus, "edge_registry_reviews", "status"),
    (governance.SchemaStatus, "edge_schema_registry", "status"),
])
def test_enum_values_are_the_column_check(enum_type: type[enum.StrEnum], table: str,
                                          column: str) -> None:
    assert {m.value for m in enum_type} == _checked_values(table, column)


def test_schema_versions_use_the_schema_status_values() -> None:
    """A schema version is never abandoned (its registry entry is, docs/governance.md)."""
    allowed = _checked_values("edge_schema_versions", "status")
    assert allowed == {m.value for m in governance.SchemaStatus} - {"abandoned"}
