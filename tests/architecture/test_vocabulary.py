"""The vocabulary enums and the database agree: each enum's values are exactly those the
column's CHECK constraint allows (read from the migrations), so a new value cannot be
added on one side only."""

from __future__ import annotations

import argparse
import enum
import re
from pathlib import Path

import pytest

from edgesync import control, governance, protocol, quarantine, store

_MIGRATIONS = Path(store.__file__).resolve().parent / "migrations"


def _checked_values(table: str, column: str) -> set[str]:
    """The values of the latest ``CHECK (column IN (...))`` on ``table``: in its ``CREATE
    TABLE``, or in a later ``ALTER TABLE table ADD CONSTRAINT`` that replaced it."""
    found: list[set[str]] = []
    check = rf"CHECK \({column} IN\s*\(([^)]*)\)\)"
    for path in sorted(_MIGRATIONS.glob("*.sql")):
        sql = path.read_text()
        for m in re.finditer(rf"CREATE TABLE (?:IF NOT EXISTS )?{table} \((.*?)\n\);", sql,
                             re.DOTALL):
            found += [set(re.findall(r"'([a-z_]+)'", c)) for c in re.findall(check, m.group(1))]
        for m in re.finditer(rf"ALTER TABLE {table} ADD CONSTRAINT \w+\s+{check}", sql):
            found.append(set(re.findall(r"'([a-z_]+)'", m.group(1))))
    assert found, f"no CHECK constraint on {table}.{column}"
    return found[-1]


@pytest.mark.parametrize("enum_type, table, column", [
    (governance.LineageStatus, "edge_table_lineages", "status"),
    (governance.StagingReason, "edge_staged_rows", "staging_reason"),
    (governance.ReviewStatus, "edge_schema_reviews", "status"),
    (governance.ReviewStatus, "edge_registry_reviews", "status"),
    (governance.SchemaStatus, "edge_schema_registry", "status"),
    (control.ResnapshotStatus, "edge_resnapshots", "status"),
    (control.VerificationStatus, "edge_verifications", "status"),
    (protocol.Compression, "edge_sync_policies", "compression"),
])
def test_enum_values_are_the_column_check(enum_type: type[enum.StrEnum], table: str,
                                          column: str) -> None:
    assert {m.value for m in enum_type} == _checked_values(table, column)


def test_schema_versions_use_the_schema_status_values() -> None:
    """A schema version is never abandoned (its registry entry is, docs/governance.md)."""
    allowed = _checked_values("edge_schema_versions", "status")
    assert allowed == {m.value for m in governance.SchemaStatus} - {"abandoned"}


def _cli_choices() -> dict[tuple[str, ...], list[str]]:
    """``(command…, option) → choices`` of every ``--status``/``--reason`` of the CLI."""
    from edgesync.cli import _parser

    found: dict[tuple[str, ...], list[str]] = {}

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*path, name))
            elif action.choices and action.option_strings[:1] in (["--status"], ["--reason"]):
                found[(*path, action.option_strings[0])] = [str(c) for c in action.choices]

    walk(_parser(), ())
    return found


def test_cli_choices_spell_the_enums() -> None:
    """The CLI parsers spell the values out (the HTTP client loads no server package):
    they must stay the enums' values, in the enums' order."""
    expected = {
        ("reviews", "list", "--status"): governance.ReviewStatus,
        ("registry", "reviews", "--status"): governance.ReviewStatus,
        ("registry", "list", "--status"): governance.SchemaStatus,
        ("lineages", "list", "--status"): governance.LineageStatus,
        ("lineages", "discard-staged", "--reason"): governance.StagingReason,
        ("lineages", "quarantine", "list", "--status"): quarantine.QuarantineStatus,
    }
    choices = _cli_choices()
    assert set(choices) == set(expected)
    for key, enum_type in expected.items():
        assert choices[key] == [m.value for m in enum_type], key


def test_control_kinds_are_documented() -> None:
    """Every ``ControlKind`` is spelled in docs/protocol.md or docs/agent.md (the agent's
    table of downlink controls), so a new kind cannot ship undocumented."""
    from edgesync.protocol import ControlKind

    docs = Path(__file__).resolve().parents[2] / "docs"
    text = (docs / "protocol.md").read_text() + (docs / "agent.md").read_text()
    assert [k.value for k in ControlKind if f"`{k.value}`" not in text] == []
