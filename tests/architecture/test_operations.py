"""Each operator action is one function of ``edgesync.operations`` that the HTTP API's
routes and the database-direct CLI both call: neither assembles it from the owners'
functions itself, and the CLI runs no SQL of its own."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from edgesync import errors, operations

_PACKAGE = Path(errors.__file__).resolve().parent
_ROUTES = sorted((_PACKAGE / "api" / "routes").glob("*.py"))
_CLI = sorted((_PACKAGE / "cli").glob("*.py"))

# Who calls each operation: both, or the one side that offers the action (the CLI reaches
# the others over the HTTP API; tokens and the plain listings are the CLI's alone).
BOTH = {"approve_review", "reject_review", "revoke_device"}
ROUTES_ONLY = {"attach_policy", "delete_lineage", "discard_quarantined", "discard_staged",
               "reopen_review", "replay_rejected", "request_resnapshot", "request_verify",
               "reset_materialization", "retry_all", "retry_row"}
CLI_ONLY = {"create_token", "device_overview", "lineage_overview", "revoke_token"}

# The owners' steps an operation puts together: called from a route or the CLI, they
# would be the action assembled a second time.
STEPS = {("governance", "approve_review"), ("governance", "reject_review"),
         ("governance", "reopen_review"), ("governance", "delete_lineage_row"),
         ("governance", "get_lineage_for_update"), ("governance", "replay_rejected"),
         ("staging", "label_schema_rejected"),
         ("staging", "requeue_failed"), ("staging", "discard_staged"),
         ("control", "reset_materialization"), ("control", "forget_on_device"),
         ("control", "request_resnapshot"), ("control", "request_verify"),
         ("quarantine", "retry_row"), ("quarantine", "retry_all"), ("quarantine", "discard"),
         ("registry", "revoke_device"), ("credentials", "revoke_credentials"),
         ("syncpolicy", "attach_policy"), ("identity", "issue_token"),
         ("identity", "grant")}

_SQL = re.compile(r"\b(SELECT|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM)\b")


def _operations_called(path: Path) -> set[str]:
    """Names of ``edgesync.operations`` a module uses: ``operations.X`` or imported."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "operations"):
            found.add(node.attr)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "edgesync.operations"):
            found.update(a.name for a in node.names)
    return found


def _steps_called(path: Path) -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and (node.func.value.id, node.func.attr) in STEPS):
            found.add((node.func.value.id, node.func.attr))
    return found


def _called_by(paths: list[Path]) -> set[str]:
    return set().union(*(_operations_called(p) for p in paths))


def test_every_operation_has_its_callers_listed() -> None:
    functions = {name for name in operations.__all__
                 if inspect.iscoroutinefunction(getattr(operations, name))}
    assert functions == BOTH | ROUTES_ONLY | CLI_ONLY


def test_the_routes_and_the_cli_reach_the_operations() -> None:
    routes, cli = _called_by(_ROUTES), _called_by(_CLI)
    assert BOTH - routes == set()
    assert BOTH - cli == set()
    assert ROUTES_ONLY - routes == set()
    assert CLI_ONLY - cli == set()


def test_no_route_or_cli_module_assembles_an_action_itself() -> None:
    found = {f"{p.relative_to(_PACKAGE)}: {owner}.{name}"
             for p in [*_ROUTES, *_CLI] for owner, name in _steps_called(p)}
    assert found == set()


def test_the_cli_runs_no_sql_of_its_own() -> None:
    found = []
    for path in _CLI:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and _SQL.search(node.value)):
                found.append(f"{path.relative_to(_PACKAGE)}:{node.lineno}")
    assert found == []


def test_the_scans_see_calls_imports_and_sql(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from edgesync.operations import revoke_token\n"
                     "operations.approve_review(conn)\nstaging.requeue_failed(conn)\n",
                     encoding="utf-8")
    assert _operations_called(probe) == {"revoke_token", "approve_review"}
    assert _steps_called(probe) == {("staging", "requeue_failed")}
    assert _SQL.search("SELECT id FROM edge_projects")
    assert _SQL.search("UPDATE edge_devices SET x = 1")
