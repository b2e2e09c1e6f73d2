"""The import graph of ``python/edgesync``, read with ``ast`` (nothing is imported).

An edge ``a → b`` means running module ``a`` imports module ``b``:

* imports inside functions are edges (they run, only later: the usual hiding place of a
  cycle); imports under ``if TYPE_CHECKING:`` are not (they never run);
* relative imports are resolved; ``from p import x`` names the module ``p.x`` when ``x``
  is a module, else ``p``;
* importing ``a.b.c`` also imports the packages ``a`` and ``a.b`` (their ``__init__``),
  except the importer's own enclosing packages: Python has entered those before the
  importer runs, so they are no dependency of it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "python"


@dataclass(frozen=True, slots=True)
class Import:
    target: str
    line: int
    in_function: bool


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of ``edgesync`` by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for path in sorted((root / "edgesync").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return ast.unparse(test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _statements(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Each import statement that runs, and whether it is inside a function."""
    def visit(node: ast.AST, in_function: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom,
                                                                  bool]]:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                yield from visit(child, in_function)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, in_function
            return
        inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef
                                          | ast.Lambda)
        for child in ast.iter_child_nodes(node):
            yield from visit(child, inner)
    yield from visit(tree, False)


def imports(name: str, path: Path, known: dict[str, Path]) -> list[Import]:
    """The ``edgesync`` modules that module ``name`` imports (parents included)."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    enclosing = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    found: list[Import] = []
    for node, in_function in _statements(ast.parse(path.read_text(), str(path))):
        named: list[str] = []
        if isinstance(node, ast.Import):
            named = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                up = package.split(".")
                up = up[:len(up) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                named.append(sub if sub in known else base)
        for target in named:
            parts = target.split(".")
            for i in range(1, len(parts) + 1):
                module = ".".join(parts[:i])
                if module in known and module != name and (
                        module == target or module not in enclosing):
                    found.append(Import(module, node.lineno, in_function))
    return found


def graph(root: Path = ROOT) -> dict[str, dict[str, Import]]:
    """Module → {imported module → the first statement importing it}."""
    known = modules(root)
    edges: dict[str, dict[str, Import]] = {}
    for name, path in known.items():
        edges[name] = {}
        for imp in imports(name, path, known):
            edges[name].setdefault(imp.target, imp)
    return edges


def cycles(edges: dict[str, dict[str, Import]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted:
    every module of one is reachable from every other, so each holds at least one cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def strongconnect(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            strongconnect(v)
    return sorted(found)
