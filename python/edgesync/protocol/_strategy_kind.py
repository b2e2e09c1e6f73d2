"""How a source table is synced (``table_strategies[table].strategy``): in the agent's
YAML, in a cloud sync policy and in the ``sync_policy`` control that carries it to the
device (docs/agent.md). ``rows`` and ``telemetry`` name the pipeline the table's changes
travel by (``Pipeline``); ``ignore`` leaves the table out."""

from __future__ import annotations

import enum

__all__ = ["StrategyKind"]


class StrategyKind(enum.StrEnum):
    ROWS = "rows"  # replicate every change (needs a primary key)
    TELEMETRY = "telemetry"  # append-only readings with a timestamp column
    IGNORE = "ignore"  # not synced
