"""Operator CLI pieces that need no server: help text, column actions from flags and
files, table formatting, the database-or-API rule."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from edgesync import cli
from edgesync.cli._format import print_table
from edgesync.cli._options import uses_database
from edgesync.client._actions import column_actions
from edgesync.errors import ConfigError

COLS = ["id", "mode", "setpoint", "blob"]


@pytest.mark.parametrize("command", [
    ["lineages", "show"], ["lineages", "reset"], ["lineages", "delete"], ["lineages", "write"],
    ["lineages", "telemetry"], ["lineages", "discard-staged"], ["reviews", "show"],
    ["reviews", "claim"], ["policy", "set"],
    ["policy", "show"], ["devices", "list"], ["lineages", "reopen-review"],
    ["registry", "list"], ["registry", "show"], ["registry", "reviews"],
    ["registry", "review-show"], ["registry", "claim"], ["registry", "approve"],
    ["registry", "reject"], ["registry", "abandon"], ["registry", "mirrors"],
    ["data-points", "list"], ["data-points", "create"], ["data-points", "values"],
])
def test_help_names_the_api_and_the_database_rule(command: list[str],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main([*command, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "usage: edgesync" in out and "EDGESYNC_API_URL" in out and "--database-url" in out


def test_flags_make_one_action_per_column() -> None:
    assert column_actions(COLS, actions_file=None, mirror=[], ignore=[], defer=[]) is None
    assert column_actions(COLS, actions_file=None, mirror=["mode:hvac"], ignore=["blob"],
                          defer=["setpoint"]) == [
        {"source_column_name": "id", "action": "mirror"},
        {"source_column_name": "mode", "action": "mirror", "mirror_column_name": "hvac"},
        {"source_column_name": "setpoint", "action": "defer"},
        {"source_column_name": "blob", "action": "ignore"}]


def test_map_flags() -> None:
    assert column_actions(COLS, actions_file=None, mirror=[], ignore=[], defer=[],
                          map_=["setpoint=0b6e"], auto_map=["mode:hvac_mode", "blob"]) == [
        {"source_column_name": "id", "action": "mirror"},
        {"source_column_name": "mode", "action": "auto_create_and_map",
         "data_point_name": "hvac_mode"},
        {"source_column_name": "setpoint", "action": "map", "device_data_point_id": "0b6e"},
        {"source_column_name": "blob", "action": "auto_create_and_map"}]
    with pytest.raises(ConfigError, match="COLUMN=DATA_POINT"):
        column_actions(COLS, actions_file=None, mirror=[], ignore=[], defer=[],
                       map_=["setpoint"])
    with pytest.raises(ConfigError, match="more than one action"):
        column_actions(COLS, actions_file=None, mirror=[], ignore=["blob"], defer=[],
                       auto_map=["blob"])


def test_flags_override_the_actions_file(tmp_path: Path) -> None:
    f = tmp_path / "actions.json"
    f.write_text(json.dumps({"column_actions": [
        {"source_column_name": "mode", "action": "ignore"},
        {"source_column_name": "blob", "action": "mirror", "target_type": "bytea"}]}))
    got = column_actions(COLS, actions_file=f, mirror=["mode"], ignore=[], defer=[])
    assert got is not None
    assert {a["source_column_name"]: a for a in got} == {
        "id": {"source_column_name": "id", "action": "mirror"},
        "mode": {"source_column_name": "mode", "action": "mirror"},
        "setpoint": {"source_column_name": "setpoint", "action": "mirror"},
        "blob": {"source_column_name": "blob", "action": "mirror", "target_type": "bytea"}}


def test_actions_file_entries_keep_their_index(tmp_path: Path) -> None:
    """The API names a bad entry column_actions[i]: i must be the file's own index (the
    CLI used to sort entries by schema column, so the error named another entry)."""
    f = tmp_path / "actions.json"
    f.write_text(json.dumps([
        {"source_column_name": "blob", "action": "mirror", "target_type": "blob"},
        {"source_column_name": "mode", "action": "ignore"}]))
    got = column_actions(COLS, actions_file=f, mirror=[], ignore=[], defer=["mode"])
    assert got == [
        {"source_column_name": "blob", "action": "mirror", "target_type": "blob"},
        {"source_column_name": "mode", "action": "defer"},
        {"source_column_name": "id", "action": "mirror"},
        {"source_column_name": "setpoint", "action": "mirror"}]
    from edgesync.errors import InvalidRequestError
    from edgesync.governance._column_actions import ColumnAction

    with pytest.raises(InvalidRequestError) as info:
        [ColumnAction.parse(a, i) for i, a in enumerate(got)]
    assert info.value.field == "column_actions[0].target_type"


def test_bad_flags_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a column"):
        column_actions(COLS, actions_file=None, mirror=["nope"], ignore=[], defer=[])
    with pytest.raises(ConfigError, match="more than one action"):
        column_actions(COLS, actions_file=None, mirror=["id"], ignore=["id"], defer=[])
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ConfigError, match="cannot read"):
        column_actions(COLS, actions_file=bad, mirror=[], ignore=[], defer=[])


def test_tables_are_aligned() -> None:
    out = io.StringIO()
    print_table([{"a": "x", "b": None}, {"a": "longer", "b": True}],
                [("a", "first"), ("b", "second")], out)
    assert out.getvalue().splitlines() == ["FIRST   SECOND", "x       -", "longer  yes"]


def test_database_flags_choose_the_database(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGESYNC_DATABASE_URL", "postgresql://nowhere/db")
    parser = cli._parser()
    assert not uses_database(parser.parse_args(["reviews", "list"]))
    assert uses_database(parser.parse_args(["reviews", "list", "--database-url", "x"]))
    assert uses_database(parser.parse_args(["lineages", "list", "--data-dir", "/tmp/x"]))


def test_missing_connection_settings_are_named(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    for var in ("EDGESYNC_TOKEN", "EDGESYNC_ORG_ID", "EDGESYNC_PROJECT"):
        monkeypatch.delenv(var, raising=False)
    assert cli.main(["lineages", "list"]) == 2
    assert "--token" in capsys.readouterr().err
    assert cli.main(["lineages", "list", "--token", "t", "--org-id", "o"]) == 2
    assert "--project" in capsys.readouterr().err
