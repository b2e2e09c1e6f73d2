"""What an agent may put on the wire, as the agent's YAML and a sync policy of the cloud
both spell it (docs/agent.md, "Constrained links").

``compression``: ``none`` (the default, the reference's plain UTF-8 JSON) or ``zstd`` (one
zstd frame of exactly that JSON, which the cloud recognises by its magic number).
``max_bytes_per_second`` / ``max_bytes_per_day``: byte budgets, 0 for unlimited.
"""

from __future__ import annotations

import enum

from edgesync.errors import ConfigError

__all__ = ["BUDGET_KEYS", "Compression", "parse_byte_budget", "parse_compression"]

BUDGET_KEYS = ("max_bytes_per_second", "max_bytes_per_day")
_MOST_BYTES = 1 << 53


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


def parse_byte_budget(value: object, at: str) -> int:
    """A byte budget given as an integer (0: unlimited); ConfigError naming ``at``."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _MOST_BYTES:
        return value
    raise ConfigError(at, f"{value!r} is not a budget; use 0 (unlimited) or a number of bytes")
