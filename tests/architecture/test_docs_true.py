"""Docs that a test holds to what the code says, so they cannot drift unseen.

* ``docs/benchmarks.md`` stays a reference of methods and current figures, not a log: at
  most ``BENCHMARKS_MAX_LINES`` lines (git keeps the history of past runs), and every
  ``benches/bench_*.py`` named in one of its section headings.
* The owners table of ``docs/architecture.md`` ("Owners") maps the same tables to the same
  modules as ``OWNERS`` of ``test_table_owners.py``, the map that test checks against the
  SQL text of the package.
* The routes of ``docs/api.md`` are the routes of the OpenAPI document of the app
  ``edgesync serve`` runs (``create_app`` with the upload and JITR routers), compared as
  (method, path) pairs, both ways. A route counts as documented when it is

  - a row of the route table (``| GET | `/edge/lineages` | …``), its path relative to
    ``/core/api/v1/projects/{project_id}`` (the note above the table), or
  - written out in full in a code span anywhere in api.md
    (`` `GET /core/api/v1/projects` ``; a query string is ignored): the few routes that do
    not live under one project.

  Routes outside the OpenAPI document (``/healthz``, ``/readyz``, ``/metrics``,
  ``/console``, ``/docs``) are documented in prose and not compared.
* Every command of the CLI (each leaf of its parser tree) is written out somewhere in
  ``docs/`` or the README as ``edgesync <words>``; alternatives count
  (``edgesync sync-policies attach|detach``, ``staged-rows ID | mirror-rows ID``).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from test_table_owners import DYNAMIC_OWNER, OWNERS

from edgesync.api import create_app
from edgesync.api.routes.jitr import make_jitr_router
from edgesync.api.routes.uploads import upload_router
from edgesync.cli import _parser
from edgesync.control import ObjectStore

DOCS = Path(__file__).resolve().parents[2] / "docs"
README = DOCS.parent / "README.md"
# About 25 lines a benchmark (method, knobs, one table, how to read it), 13 of them.
BENCHMARKS_MAX_LINES = 360
PROJECT_PREFIX = "/core/api/v1/projects/{project_id}"
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")

_CODE = re.compile(r"`([^`]+)`")
_TABLE_ROW = re.compile(rf"^\|\s*({'|'.join(_METHODS)})\s*\|\s*`(/[^`]*)`\s*\|", re.MULTILINE)
_FULL_ROUTE = re.compile(rf"`({'|'.join(_METHODS)}) (/core/[^`?\s]*)[^`]*`")


def _section(text: str, heading: str) -> str:
    """The lines of ``heading``'s section, up to the next heading of any level."""
    start = text.index(f"\n{heading}\n")
    end = re.search(r"^#", text[start + len(heading) + 2:], re.MULTILINE)
    return text[start:] if end is None else text[start:start + len(heading) + 2 + end.start()]


def documented_owners(text: str) -> dict[str, str]:
    """Table → owner from the owners table of architecture.md. A cell may list several
    tables and one owner (all of them its), or as many owners as tables, in order; an owner
    written ``._name`` is in the package of the first one; what is in parentheses (a note,
    the functions others call) is not a table or an owner. ``edge_state_*`` and
    ``edge_ts_*`` map to the owner of the tables named at run time."""
    owners: dict[str, str] = {}
    rows = [line for line in _section(text, "## Owners: who writes which table").splitlines()
            if line.startswith("| `")]
    for row in rows:
        tables_cell, owner_cell = (re.sub(r"\([^)]*\)", "", cell)
                                   for cell in row.strip("|").split("|")[:2])
        tables = _CODE.findall(tables_cell)
        modules = _CODE.findall(owner_cell)
        package = modules[0].split(".")[0]
        modules = [package + m if m.startswith(".") else m for m in modules]
        assert len(modules) in (1, len(tables)), f"tables and owners do not pair up: {row}"
        for table, module in zip(tables, modules * len(tables) if len(modules) == 1
                                 else modules, strict=True):
            if table.endswith("*"):
                module += "."  # run-time names: the owner is a package, any of its modules
            owners[table] = module
    return owners


def test_benchmarks_md_is_a_reference_not_a_log() -> None:
    lines = (DOCS / "benchmarks.md").read_text().count("\n")
    assert lines <= BENCHMARKS_MAX_LINES, (
        f"docs/benchmarks.md has {lines} lines: keep each benchmark's method and one table "
        "of its current figures; older runs are in git")


def test_every_benchmark_has_its_section_in_benchmarks_md() -> None:
    benches = {p.name for p in (DOCS.parent / "benches").glob("bench_*.py")}
    headings = re.findall(r"^## .*", (DOCS / "benchmarks.md").read_text(), re.MULTILINE)
    named = {name for name in benches if any(f"`{name}`" in h for h in headings)}
    assert len(benches) >= 8 and named == benches, f"no section: {sorted(benches - named)}"


def test_the_owners_table_is_the_map_the_owners_test_checks() -> None:
    documented = documented_owners((DOCS / "architecture.md").read_text())
    dynamic = {t: o for t, o in documented.items() if t.endswith("*")}
    assert set(dynamic) == {"edge_state_*", "edge_ts_*"}
    assert set(dynamic.values()) == {DYNAMIC_OWNER}
    fixed = {t: o for t, o in documented.items() if not t.endswith("*")}
    missing = {t: o for t, o in OWNERS.items() if fixed.get(t) != o}
    extra = {t: o for t, o in fixed.items() if OWNERS.get(t) != o}
    assert (missing, extra) == ({}, {}), (
        "docs/architecture.md, Owners: (rows test_table_owners.OWNERS has that the table "
        "lacks or gives another owner, rows of the table that OWNERS does not have)")


def test_the_owners_table_reader_pairs_tables_with_owners() -> None:
    """The reader above on a table like architecture.md's (a wrong pairing would make the
    comparison meaningless)."""
    text = ("\n## Owners: who writes which table\n\n| table | owner | what others call |\n"
            "|---|---|---|\n"
            "| `edge_a` (the note) | `pkg._a` | `f` |\n"
            "| `edge_b`, `edge_c` | `pkg._b` (`g`), `._c` | |\n"
            "| `edge_d`, `edge_e` | `other._d` | |\n"
            "| `edge_state_*` (+ partitions) | `materialize` | `h` |\n\n"
            "## Next\n| `edge_x` | `x` |\n")
    assert documented_owners(text) == {
        "edge_a": "pkg._a", "edge_b": "pkg._b", "edge_c": "pkg._c", "edge_d": "other._d",
        "edge_e": "other._d", "edge_state_*": "materialize."}


def served_routes(tmp_path: Path) -> set[tuple[str, str]]:
    """(method, path) of the OpenAPI document of the app as ``edgesync serve`` builds it
    (server/_server.py: ``create_app`` with the upload and JITR routers). No database is
    reached: the pool is opened by the app's lifespan, which never runs here."""
    app = create_app(database_url="postgresql://127.0.0.1/unused", routers=[
        upload_router(lambda: None, ObjectStore(tmp_path)), make_jitr_router()])
    paths = app.openapi()["paths"]
    return {(method.upper(), path) for path, item in paths.items() for method in item}


def documented_routes(text: str) -> set[tuple[str, str]]:
    """(method, path) of api.md by the rule of this module's docstring."""
    rows = {(method, path if path.startswith("/core/") else PROJECT_PREFIX + path)
            for method, path in _TABLE_ROW.findall(text)}
    return rows | set(_FULL_ROUTE.findall(text))


def test_api_md_lists_the_routes_of_the_openapi_document(tmp_path: Path) -> None:
    served = served_routes(tmp_path)
    documented = documented_routes((DOCS / "api.md").read_text())
    undocumented = sorted(served - documented)
    gone = sorted(documented - served)
    assert (undocumented, gone) == ([], []), (
        "docs/api.md: (routes of the OpenAPI document it does not list, routes it lists "
        "that the document does not have)")


def test_the_route_reader_takes_rows_and_full_paths_only() -> None:
    text = ("| GET | `/edge/lineages` | read | x |\n"
            "| POST | `/core/api/v1/other/{id}` | read | x |\n"
            "| field | `default` | x |\n"
            "`PUT /core/api/v1/edge/uploads/{upload_id}?expires=…`, and `POST /devices` in "
            "prose (relative: not a route of its own)\n")
    assert documented_routes(text) == {
        ("GET", PROJECT_PREFIX + "/edge/lineages"), ("POST", "/core/api/v1/other/{id}"),
        ("PUT", "/core/api/v1/edge/uploads/{upload_id}")}


def cli_commands(parser: argparse.ArgumentParser) -> list[tuple[str, ...]]:
    """The word paths of the parser tree's leaves: ``("lineages", "quarantine", "list")``."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [()]
    return [(name, *rest) for action in subs for name, sub in action.choices.items()
            for rest in cli_commands(sub)]


def documents_command(text: str, words: tuple[str, ...]) -> bool:
    """Whether ``text`` writes ``edgesync <words>``, the last word alone or as one of the
    alternatives after its parent command (``a|b``, ``a ID | b ID``)."""
    *parents, last = words
    head = " ".join(("edgesync", *parents))
    alternative = re.compile(rf"(?:^|[\s|]){re.escape(last)}(?:$|[\s|])")
    for line in text.splitlines():
        at = line.find(head + " ")
        if at < 0:
            continue
        rest = line[at + len(head):]
        if re.match(rf" {re.escape(last)}(?:$|[\s|`])", rest):
            return True
        if "|" in rest and alternative.search(rest.split("#")[0]):
            return True
    return False


def test_every_cli_command_is_documented() -> None:
    text = "\n".join(p.read_text() for p in [README, *sorted(DOCS.glob("*.md"))])
    commands = cli_commands(_parser())
    assert len(commands) > 50  # the tree was walked, not its root alone
    assert [" ".join(c) for c in commands if not documents_command(text, c)] == []


def test_the_command_reader_takes_alternatives_but_not_prefixes() -> None:
    text = ("edgesync lineages staged-rows ID | mirror-rows ID\n"
            "`edgesync sync-policies attach|detach ID`\n"
            "edgesync devices list   # connected, last seen; see add-on\n")
    assert documents_command(text, ("lineages", "mirror-rows"))
    assert documents_command(text, ("sync-policies", "detach"))
    assert documents_command(text, ("devices", "list"))
    assert not documents_command(text, ("devices", "add"))
    assert not documents_command(text, ("devices", "li"))
    assert not documents_command(text, ("lineages", "staged"))
