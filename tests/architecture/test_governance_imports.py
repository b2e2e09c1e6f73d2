"""``governance`` has no hidden import cycle: no module imports a sibling inside a
function (the way a cycle is usually hidden), except under ``if TYPE_CHECKING:``, and
the module-level imports between siblings form no cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import edgesync.governance

_DIR = Path(edgesync.governance.__file__).resolve().parent
_PREFIX = "edgesync.governance."


def _sibling(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The governance modules an import statement names."""
    if isinstance(node, ast.ImportFrom):
        names = [node.module or ""] if node.level == 0 else []
        if node.level == 1:  # from . import x / from ._x import y
            names = [f"{_PREFIX}{node.module}" if node.module else _PREFIX[:-1]]
    else:
        names = [a.name for a in node.names]
    return [n for n in names if n.startswith(_PREFIX)]


def _is_type_checking(test: ast.expr) -> bool:
    return ast.unparse(test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _imports(tree: ast.Module) -> tuple[list[tuple[int, str]], list[str]]:
    """(imports of a sibling inside a function, siblings imported at module level outside
    ``if TYPE_CHECKING:``)."""
    nested: list[tuple[int, str]] = []
    top: list[str] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child, in_function)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            for name in _sibling(node):
                if in_function:
                    nested.append((node.lineno, name))
                else:
                    top.append(name)
        inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef
                                          | ast.Lambda)
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, False)
    return nested, top


def _modules() -> dict[str, ast.Module]:
    return {f"{_PREFIX}{p.stem}": ast.parse(p.read_text(), str(p))
            for p in sorted(_DIR.glob("_*.py")) if p.name != "__init__.py"}


def test_no_function_level_import_of_a_sibling() -> None:
    found = [f"{name}:{line} imports {target}"
             for name, tree in _modules().items()
             for line, target in _imports(tree)[0]]
    assert found == []


def test_module_level_imports_between_siblings_form_no_cycle() -> None:
    graph = {name: set(_imports(tree)[1]) for name, tree in _modules().items()}
    assert len(graph) > 10
    state: dict[str, str] = {}  # visiting | done

    def walk(name: str, path: list[str]) -> None:
        if state.get(name) == "done":
            return
        assert state.get(name) != "visiting", " → ".join([*path, name])
        state[name] = "visiting"
        for target in sorted(graph.get(name, ())):
            walk(target, [*path, name])
        state[name] = "done"

    for name in sorted(graph):
        walk(name, [])


def test_the_check_sees_a_hidden_import() -> None:
    """The visitor finds an import inside a function and skips a TYPE_CHECKING one."""
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from edgesync.governance._bindings import X\n"
        "from edgesync.governance._events import emit\n"
        "async def f():\n    from edgesync.governance._admission import admit\n")
    nested, top = _imports(tree)
    assert nested == [(6, "edgesync.governance._admission")]
    assert top == ["edgesync.governance._events"]
