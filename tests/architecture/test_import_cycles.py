"""No import cycle in ``python/edgesync``: the module import graph, read with ``ast``
(``kits.import_graph``: imports inside functions are edges, ``if TYPE_CHECKING:`` imports
are not, relative imports resolved, importing ``a.b.c`` imports the package ``a.b``), has
no strongly connected component of more than one module."""

from __future__ import annotations

from pathlib import Path

from kits.import_graph import Import, cycles, graph, imports, modules


def _describe(component: list[str], edges: dict[str, dict[str, Import]]) -> str:
    members = set(component)
    lines = [f"  {a} → {b} (line {imp.line}{', in a function' if imp.in_function else ''})"
             for a in component for b, imp in sorted(edges[a].items()) if b in members]
    return "cycle among " + ", ".join(component) + ":\n" + "\n".join(lines)


def test_no_import_cycle() -> None:
    edges = graph()
    found = cycles(edges)
    assert found == [], "\n".join(_describe(c, edges) for c in found)


def test_the_graph_reader_follows_the_rules(tmp_path: Path) -> None:
    """On a small package: function-level imports count, TYPE_CHECKING ones do not,
    relative imports resolve, and a submodule import reaches its package's __init__."""
    root = tmp_path
    pkg = root / "edgesync" / "p"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from edgesync.p._a import A\n")
    (pkg / "_a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from . import _b\n"
        "if TYPE_CHECKING:\n    from edgesync.p._c import C\n"
        "A = 1\n")
    (pkg / "_b.py").write_text("def f():\n    from .sub._d import D\n")
    (pkg / "_c.py").write_text("from edgesync.p._a import A\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "_d.py").write_text("from edgesync.p import A\n")
    known = modules(root)
    assert set(known) == {"edgesync.p", "edgesync.p._a", "edgesync.p._b", "edgesync.p._c",
                          "edgesync.p.sub", "edgesync.p.sub._d"}

    def targets(name: str) -> set[str]:
        return {i.target for i in imports(name, known[name], known)}

    assert targets("edgesync.p._a") == {"edgesync.p._b"}  # TYPE_CHECKING: no edge
    assert targets("edgesync.p._b") == {"edgesync.p.sub", "edgesync.p.sub._d"}
    # an enclosing package is no dependency, but importing it by name is
    assert targets("edgesync.p.sub._d") == {"edgesync.p"}
    edges = {n: {i.target: i for i in imports(n, p, known)} for n, p in known.items()}
    assert cycles(edges) == [["edgesync.p", "edgesync.p._a", "edgesync.p._b",
                              "edgesync.p.sub._d"]]
