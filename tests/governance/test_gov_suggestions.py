"""``suggest``: the previous approval's decisions carried to a new schema, column by column
(no database: the previous actions and the target's column types are given)."""

from __future__ import annotations

import uuid
from typing import Any

from edgesync.governance import SuggestionKind
from edgesync.governance._column_actions import ColumnAction
from edgesync.governance._suggestions import suggest


def col(name: str, affinity: str) -> dict[str, Any]:
    return {"name": name, "decl_type_affinity": affinity, "pk_ordinal": 0, "not_null": False}


def test_decisions_carry_and_changes_need_a_decision() -> None:
    point = uuid.uuid4()
    before = [col("id", "INTEGER"), col("state", "TEXT"), col("temp", "REAL"),
              col("level", "INTEGER"), col("debug", "BLOB"), col("hum", "REAL"),
              col("later", "TEXT")]
    previous = [ColumnAction("id", "mirror", "id", "bigint"),
                ColumnAction("state", "mirror", "machine_state", "text"),
                ColumnAction("temp", "mirror", "temp", "double precision"),
                ColumnAction("level", "mirror", "level", "numeric"),
                ColumnAction("debug", "ignore"),
                ColumnAction("hum", "auto_create_and_map", None, "double precision", point, "h"),
                ColumnAction("later", "defer")]
    existing = {"id": "bigint", "machine_state": "text", "temp": "double precision",
                "level": "numeric", "temp_text": "bigint"}
    now = [col("id", "INTEGER"), col("state", "TEXT"), col("temp", "TEXT"),
           col("level", "INTEGER"), col("debug", "TEXT"), col("hum", "REAL"),
           col("later", "TEXT"), col("unit", "TEXT"), col("temp_c", "REAL")]
    got = {s.action.source_column_name: s for s in suggest(now, before, previous, existing)}
    kinds = {n: s.kind for n, s in got.items()}
    assert kinds == {
        "id": SuggestionKind.CARRIED, "state": SuggestionKind.CARRIED,
        "temp": SuggestionKind.NEEDS_DECISION, "level": SuggestionKind.CARRIED,
        "debug": SuggestionKind.CARRIED, "hum": SuggestionKind.CARRIED,
        "later": SuggestionKind.NEEDS_DECISION, "unit": SuggestionKind.NEW,
        "temp_c": SuggestionKind.NEW}
    # the same mirror name; a type the operator chose is kept, the inferred one not sent
    assert (got["state"].action.mirror_column_name, got["state"].action.target_type) == (
        "machine_state", None)
    assert got["level"].action.target_type == "numeric"
    # retyped: beside its old column, on a free name (temp_text is taken)
    assert got["temp"].action.mirror_column_name == "temp_text_2"
    assert "REAL to TEXT" in got["temp"].reason
    # ignored stays ignored whatever its type; a mapped point is mapped again, not re-created
    assert got["debug"].action.action == "ignore"
    doc = got["hum"].as_json()
    assert (doc["action"], doc["device_data_point_id"], "data_point_name" in doc) == (
        "map", str(point), False)
    assert got["unit"].action == ColumnAction("unit", "mirror")


def test_a_first_review_mirrors_every_column_unless_the_target_disagrees() -> None:
    got = suggest([col("id", "INTEGER"), col("v", "TEXT")], None, None, {"v": "bigint"})
    assert [(s.action.mirror_column_name, s.kind) for s in got] == [
        (None, SuggestionKind.NEW), ("v_text", SuggestionKind.NEEDS_DECISION)]
