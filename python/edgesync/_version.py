"""The installed distribution's version (``edgesync --version``, the API, metrics)."""

from __future__ import annotations

from importlib import metadata

__all__ = ["version"]


def version() -> str:
    try:
        return metadata.version("edgesync")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare tree
        return "0+unknown"
