"""The vocabulary: each enum's values are exactly those the column's CHECK constraint
allows (read from the migrations), so a new value cannot be added on one side only; and
the words are spelled once, in their enum (``test_no_module_spells_a_word_of_the_vocabulary``
says the rule)."""

from __future__ import annotations

import argparse
import ast
import enum
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from edgesync import control, errors, fleet, governance, ingest, protocol, quarantine, store
from edgesync.agent.jobs._uploads import UploadStatus, UploadStep
from edgesync.governance._registry import RegistryRoute

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
    (governance.Classification, "edge_schema_versions", "classification"),
    (ingest.LedgerOutcome, "edge_export_segments", "outcome"),
    (protocol.Pipeline, "edge_table_lineages", "pipeline"),
    (protocol.Pipeline, "edge_quarantined_rows", "pipeline"),
    (control.UploadStatus, "edge_uploads", "status"),
    (control.ResnapshotStatus, "edge_resnapshots", "status"),
    (control.VerificationStatus, "edge_verifications", "status"),
    (control.ControlStatus, "edge_pending_controls", "status"),
    (governance.ReplayStatus, "edge_replay_intents", "status"),
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


# --- the words spelled once ---------------------------------------------------------

_ROOT = Path(errors.__file__).resolve().parent  # python/edgesync
_CLIENT_SIDE = ("cli/", "client/", "tui/")


@dataclass(frozen=True)
class Word:
    vocabulary: type[enum.StrEnum]
    home: str  # the enum's module, relative to python/edgesync
    subjects: frozenset[str]  # the names a compared or assigned value goes by
    # the HTTP client, the TUI and the CLI must use it too (from edgesync._vocabulary)
    client_side: bool = False
    within: str = ""  # only modules under this path (a word of one side)
    outside: tuple[str, ...] = ()  # not modules under these paths (see VOCABULARY)


VOCABULARY = (
    Word(errors.ApiErrorCode, "errors.py", frozenset({"code"}), client_side=True),
    Word(protocol.Pipeline, "protocol/_pipeline.py", frozenset({"pipeline"}), client_side=True),
    Word(protocol.StrategyKind, "protocol/_strategy_kind.py", frozenset({"strategy"})),
    Word(governance.SyncAuthority, "governance/_lineages.py",
         frozenset({"sync_authority", "authority"}), client_side=True),
    Word(governance.LineageStatus, "governance/_lineages.py", frozenset({"status"}),
         client_side=True),
    Word(governance.PauseReason, "governance/_lineages.py", frozenset({"pause_reason"}),
         client_side=True),
    Word(governance.ColumnActionKind, "governance/_column_actions.py", frozenset({"action"}),
         client_side=True),
    Word(governance.Classification, "governance/_classify.py",
         frozenset({"classification"})),
    Word(RegistryRoute, "governance/_registry.py", frozenset({"outcome"})),
    Word(fleet.CoalescingMode, "fleet/_policy.py",
         frozenset({"mode", "scope", "schema_coalescing_mode"})),
    # observe is below ingest (ingest reports to it): its ``outcome`` is a metrics label,
    # OutcomeStatus's words and its own ``failed``/``abandoned``.
    Word(ingest.LedgerOutcome, "ingest/_outcome.py", frozenset({"outcome"}),
         outside=("observe/",)),
    Word(control.UploadStatus, "control/_uploads.py", frozenset({"status"}),
         outside=("agent/",)),
    # The agent's own bookkeeping of an upload, in its state.db.
    Word(UploadStep, "agent/jobs/_uploads.py", frozenset({"step"}), within="agent/"),
    Word(UploadStatus, "agent/jobs/_uploads.py", frozenset({"status"}), within="agent/"),
)


def _subject(node: ast.AST) -> str | None:
    """The name a value goes by: ``x``, ``a.x``, ``a["x"]`` → ``x``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
            and isinstance(node.slice.value, str):
        return node.slice.value
    return None


def _literals(node: ast.AST) -> list[str] | None:
    """The strings of a literal, or of a tuple/list/set (or ``frozenset({…})``) of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in ("frozenset", "set", "tuple") and len(node.args) == 1:
        return _literals(node.args[0])
    if isinstance(node, ast.Tuple | ast.List | ast.Set) and node.elts:
        found = [e.value for e in node.elts
                 if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return found if len(found) == len(node.elts) else None
    return None


# The clients' copy of the server's words, written from the enums (api._vocabulary).
_CLIENT_COPY = "_vocabulary.py"


def _applies(word: Word, path: str) -> bool:
    if path in (word.home, _CLIENT_COPY) or not path.startswith(word.within) \
            or path.startswith(word.outside):
        return False
    return word.client_side or not path.startswith(_CLIENT_SIDE)


def _spelled(word: Word, subject: str | None, values: list[str] | None) -> bool:
    return (subject in word.subjects and values is not None
            and any(v in word.vocabulary._value2member_map_ for v in values))


def _whole_enum(word: Word, values: list[str] | None) -> bool:
    """A collection that copies (part of) the enum: two or more of its values, nothing else."""
    return values is not None and len(values) > 1 \
        and all(v in word.vocabulary._value2member_map_ for v in values)


def _match_subject(tree: ast.AST) -> dict[ast.AST, str | None]:
    """Each ``case`` pattern → the subject of its ``match``."""
    return {case.pattern: _subject(m.subject) for m in ast.walk(tree)
            if isinstance(m, ast.Match) for case in m.cases}


def findings(source: str, path: str) -> list[str]:
    """``path:line: word (Enum)`` for each spelled-out word the rule flags."""
    tree = ast.parse(source)
    matched = _match_subject(tree)
    out: list[str] = []

    def flag(node: ast.AST, word: Word, values: list[str]) -> None:
        spelled = [v for v in values if v in word.vocabulary._value2member_map_]
        out.append(f"{path}:{getattr(node, 'lineno', 0)}: {', '.join(spelled)} "
                   f"({word.vocabulary.__name__})")

    for node in ast.walk(tree):
        for word in VOCABULARY:
            if not _applies(word, path):
                continue
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                for left, op, right in zip(sides, node.ops, sides[1:], strict=False):
                    if isinstance(op, ast.In | ast.NotIn):
                        pairs = [(_subject(left), _literals(right))]
                    elif isinstance(op, ast.Eq | ast.NotEq):
                        pairs = [(_subject(left), _literals(right)),
                                 (_subject(right), _literals(left))]
                    else:
                        continue
                    for subject, values in pairs:
                        if values is not None and _spelled(word, subject, values):
                            flag(node, word, values)
            elif isinstance(node, ast.MatchValue) and node in matched:
                values = _literals(node.value)
                if values is not None and _spelled(word, matched[node], values):
                    flag(node, word, values)
            elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                values = _literals(node.value)
                for target in targets:
                    if values is not None and (_spelled(word, _subject(target), values)
                                               or _whole_enum(word, values)):
                        flag(node, word, values)
    return sorted(out, key=lambda f: int(f.split(":")[1]))


def test_no_module_spells_a_word_of_the_vocabulary() -> None:
    """The domain's words are spelled once, in their enum: no module of ``python/edgesync``
    compares with, or assigns, a string literal of them outside the enum's own module.

    The rule, per enum: a literal is one of its values, and what it is compared with (or
    assigned to) is named like the enum's field (``pipeline``, ``sync_authority``, ``action``,
    …: a variable, an attribute, a ``["key"]``, or the name a literal is assigned to).
    Flagged are

    - ``subject == "word"`` / ``!=``, and ``subject in ("word", …)`` (a tuple, list or set of
      literals), in either order;
    - ``case "word":`` in a ``match subject:``;
    - ``subject = "word"`` (also annotated, as a dataclass default), and a constant that is a
      tuple, list, set or ``frozenset`` of literals all of one enum (a copy of the enum).

    Not flagged, on purpose: a JSON document's keys and values (``{"action": "mirror"}``,
    written for the wire or a test), SQL text (``"WHERE action = 'mirror'"``), log and error
    messages, and call arguments: none of them compares or keeps a word of its own. Naming
    the subject keeps a word of another concept apart (``"ignore"`` is a column action and a
    table strategy; ``"requested"`` an upload's step and a re-snapshot's status).

    Some modules may not load the enum: the CLI's parsers and the HTTP client and TUI load no
    server package (tests/agent/test_device_boundaries.py, tests/tui/test_tui_boundary.py),
    so they spell the server's words (``test_cli_choices_spell_the_enums`` checks the CLI's
    choices); ``ApiErrorCode`` lives in ``edgesync.errors``, which they do load."""
    found = []
    for file in sorted(_ROOT.rglob("*.py")):
        path = file.relative_to(_ROOT).as_posix()
        found += findings(file.read_text(), path)
    assert found == [], "use the enum's member:\n" + "\n".join(found)


def test_the_rule_flags_comparisons_and_copies_not_documents() -> None:
    flagged = findings(
        'if lineage.pipeline == "rows": pass\n'
        'if "telemetry" != row["pipeline"]: pass\n'
        'if act.action in ("map", "auto_create_and_map"): pass\n'
        'match lineage.pipeline:\n    case "telemetry": pass\n'
        'classification = "breaking"\n'
        '_PLAIN = frozenset({"mirror", "ignore"})\n'
        'sync_authority: str = "device_authoritative"\n',
        "governance/_example.py")
    assert [f.split(": ", 1)[0] for f in flagged] == [f"governance/_example.py:{n}"
                                                     for n in (1, 2, 3, 5, 6, 7, 8)], flagged
    assert findings(
        'doc = {"action": "mirror", "pipeline": "rows"}\n'
        'sql = "SELECT 1 WHERE action = \'mirror\'"\n'
        'log.info("pipeline %s", "rows")\n'
        'if row.kind == "ignore": pass\n'
        'if status == "running": pass\n'
        'f(kind="rows")\n',
        "governance/_example.py") == []


def test_the_agent_s_words_are_checked_in_the_agent_only() -> None:
    code = 'match step:\n    case "regrant": pass\nif up.status == "granted": pass\n'
    assert len(findings(code, "agent/_runner.py")) == 2
    assert [f.rsplit(" ", 1)[-1] for f in findings(code, "ingest/_reports.py")] == [
        "(UploadStatus)"]  # the cloud's upload status (edgesync.control)


def test_the_enum_s_own_module_and_the_clients_copy_may_spell_them() -> None:
    """The TUI and the CLI compare with ``edgesync._vocabulary``'s members, as the server
    with the enums'; only the two modules that define the words spell them."""
    code = 'if lineage.pipeline == "rows": pass\n'
    assert findings(code, "protocol/_pipeline.py") == []
    assert findings(code, "_vocabulary.py") == []
    assert findings(code, "tui/_rows.py") != []
    assert findings('if exc.code == "CONFLICT": pass\n', "tui/_rows.py") != []
