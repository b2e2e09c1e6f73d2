"""``compression``: how an agent sends its row and telemetry batches (docs/protocol.md,
"Compressed batches"), as the agent's YAML and a sync policy of the cloud both spell it.

``none`` (the default, the reference's plain UTF-8 JSON) or ``zstd`` (one zstd frame of
exactly that JSON, which the cloud recognises by its magic number).
"""

from __future__ import annotations

import enum

from edgesync.errors import ConfigError

__all__ = ["Compression", "parse_compression"]


class Compression(enum.StrEnum):
    NONE = "none"
    ZSTD = "zstd"


def parse_compression(value: object, at: str) -> Compression:
    """The setting at ``at`` (a dotted key); ConfigError naming it for anything else."""
    if isinstance(value, str):
        try:
            return Compression(value)
        except ValueError:
            pass
    allowed = " or ".join(repr(c.value) for c in Compression)
    raise ConfigError(at, f"{value!r} is not allowed; use {allowed}")
