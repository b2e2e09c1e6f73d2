"""Project policy values that drive flow control, with their documented defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["FlowPolicy"]


_DEFAULTS: dict[str, int] = {
    "max_pending_rows_per_lineage": 100_000,
    "max_pending_bytes_per_lineage": 1 << 30,
    "resume_threshold_percent": 80,
    "materialization_breaker_threshold": 5,
}


@dataclass(frozen=True, slots=True)
class FlowPolicy:
    max_pending_rows: int = 100_000
    max_pending_bytes: int = 1 << 30
    resume_threshold_percent: int = 80
    breaker_threshold: int = 5

    @classmethod
    def from_project(cls, policy: dict[str, Any]) -> FlowPolicy:
        value = {k: int(policy.get(k, d)) for k, d in _DEFAULTS.items()}
        return cls(
            max_pending_rows=value["max_pending_rows_per_lineage"],
            max_pending_bytes=value["max_pending_bytes_per_lineage"],
            resume_threshold_percent=value["resume_threshold_percent"],
            breaker_threshold=value["materialization_breaker_threshold"],
        )

    def over_cap(self, rows: int, size: int) -> bool:
        return rows > self.max_pending_rows or size > self.max_pending_bytes

    def below_resume(self, rows: int, size: int) -> bool:
        pct = self.resume_threshold_percent / 100
        return rows < self.max_pending_rows * pct and size < self.max_pending_bytes * pct
