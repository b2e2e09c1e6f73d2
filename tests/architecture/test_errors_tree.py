"""``edgesync.errors`` is what its docstring draws: the same classes, the same parents,
and no public exception class defined anywhere else."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from pathlib import Path

from edgesync import errors

_PACKAGE = Path(errors.__file__).resolve().parent
_BRANCH = re.compile(r"^(?P<indent>(?:[│ ]   )*)[├└]── (?P<name>[A-Z]\w+)")


def _drawn_tree() -> dict[str, str | None]:
    """``class name → parent`` as drawn in the module docstring."""
    assert errors.__doc__ is not None
    block = next(b for b in errors.__doc__.split("\n\n") if "└──" in b)
    lines = textwrap.dedent(block).strip("\n").splitlines()
    root = lines[0].strip()
    parents: dict[str, str | None] = {root: None}
    path = [root]  # path[d] is the latest class drawn at depth d
    for line in lines[1:]:
        m = _BRANCH.match(line)
        if m is None:
            continue  # a description continued on the next line, or the text after
        depth = len(m["indent"]) // 4 + 1
        del path[depth:]
        parents[m["name"]] = path[depth - 1]
        path.append(m["name"])
    return parents


def _runtime_tree() -> dict[str, str | None]:
    """``class name → nearest public base`` of the classes ``errors`` exports."""
    tree: dict[str, str | None] = {}
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert inspect.isclass(cls) and issubclass(cls, Exception), name
        if cls is errors.EdgesyncError:
            tree[name] = None
            continue
        tree[name] = next(b.__name__ for b in cls.__mro__[1:] if b.__name__ in errors.__all__)
    return tree


def test_docstring_tree_matches_the_classes() -> None:
    drawn = _drawn_tree()
    assert len(drawn) > 10, "the tree was not found in the docstring"
    assert drawn == _runtime_tree()


def test_every_exported_error_is_an_edgesync_error() -> None:
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.EdgesyncError), name


def test_no_public_exception_class_outside_errors_py() -> None:
    """Other modules may keep private control-flow exceptions (``_Skip``), nothing more."""
    found = []
    for path in sorted(_PACKAGE.rglob("*.py")):
        if path.name == "errors.py" and path.parent == _PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue
            bases = {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases}
            if bases & {"Exception", "BaseException"} or any(
                    b in errors.__all__ for b in bases):
                found.append(f"{path.relative_to(_PACKAGE)}: {node.name}")
    assert found == []


def test_http_errors_share_one_shape() -> None:
    for cls in (errors.ApiError, errors.ApiClientError, errors.EnrollmentError):
        exc = cls(409, "CONFLICT", "taken", "name")
        assert (exc.status, exc.code, exc.message, exc.field) == (409, "CONFLICT", "taken", "name")
    assert str(errors.ApiError(404, "NOT_FOUND", "no such thing")) == "no such thing"
    assert str(errors.ApiClientError(0, "CONNECTION_FAILED", "refused")) == (
        "CONNECTION_FAILED: refused")
    assert str(errors.ApiClientError(422, "INVALID", "bad", "f")) == (
        "HTTP 422 INVALID: bad (field f)")
    assert str(errors.EnrollmentError(400, "BAD_CERT", "expired")) == "BAD_CERT: expired"
