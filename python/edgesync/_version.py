"""The installed distribution's version (``edgesync --version``, the API, metrics)."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

__all__ = ["version"]


def version() -> str:
    try:
        return metadata.version("edgesync")
    except metadata.PackageNotFoundError:
        # A source tree on sys.path (the development venvs): the workspace's version,
        # which maturin gives the wheel.
        cargo = Path(__file__).resolve().parents[2] / "Cargo.toml"
        try:
            doc = tomllib.loads(cargo.read_text("utf-8"))
            return f"{doc['workspace']['package']['version']}+source"
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "0+unknown"
