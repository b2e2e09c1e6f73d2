"""Each package of edgesync says what it offers: ``__all__`` lists exactly the public
names its ``__init__`` binds (as httpx's test_exported_members does), every listed name
exists, and nothing private or a module is exported."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

import edgesync

# Names a module binds without offering them: ``from __future__ import annotations``.
_NOT_OFFERED = {"annotations"}


def _packages() -> list[str]:
    found = ["edgesync"]
    for info in pkgutil.walk_packages(edgesync.__path__, "edgesync."):
        if info.ispkg and not any(p.startswith("_") for p in info.name.split(".")):
            found.append(info.name)
    return sorted(found)


def _public(module: ModuleType) -> set[str]:
    return {name for name, value in vars(module).items()
            if not name.startswith("_") and name not in _NOT_OFFERED
            and not inspect.ismodule(value)}


def test_every_package_is_checked() -> None:
    names = _packages()
    for expected in ("edgesync.agent", "edgesync.api", "edgesync.governance",
                     "edgesync.ingest", "edgesync.protocol", "edgesync.store"):
        assert expected in names


@pytest.mark.parametrize("name", _packages())
def test_all_lists_exactly_the_public_names(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    public = _public(module)
    if exported is None:
        assert public == set(), f"{name} binds public names but has no __all__"
        return
    assert len(exported) == len(set(exported)), f"{name}.__all__ lists a name twice"
    missing = [n for n in exported if not hasattr(module, n)]
    assert missing == [], f"{name}.__all__ names what it does not bind"
    assert set(exported) == public, name
