"""The project's edge policy (``edge_projects.policy``): one frozen model with its
defaults and bounds, loaded into every ``DeviceScope``. The API's policy route, flow
control and governance read it; nothing else spells a default."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from edgesync.errors import InvalidRequestError

__all__ = ["POLICY_BOUNDS", "CoalescingMode", "ProjectPolicy"]


class CoalescingMode(enum.StrEnum):
    """``schema_coalescing_mode``: who decides a new schema (docs/governance.md)."""

    NONE = "none"  # each device's review
    PROJECT = "project"  # one registry for the project
    FLEET = "fleet"  # one registry per fleet


# Inclusive bounds of the integer fields (a PATCH out of them is refused).
POLICY_BOUNDS: dict[str, tuple[int, int]] = {
    "max_pending_rows_per_lineage": (1, 2**62),
    "max_pending_bytes_per_lineage": (1, 2**62),
    "resume_threshold_percent": (1, 99),
    "materialization_breaker_threshold": (1, 1_000_000),
    "verify_interval_seconds": (0, 2**31),
}


@dataclass(frozen=True, slots=True)
class ProjectPolicy:
    allow_additive_continue: bool = False  # auto-approve a schema that only adds columns
    max_pending_rows_per_lineage: int = 100_000  # staged rows before backpressure
    max_pending_bytes_per_lineage: int = 1 << 30  # staged bytes before backpressure
    resume_threshold_percent: int = 80  # resume below this % of both caps
    materialization_breaker_threshold: int = 5  # permanent errors before the lineage pauses
    schema_coalescing_mode: CoalescingMode = CoalescingMode.NONE
    allow_auto_create_device_data_points: bool = False
    verify_interval_seconds: int = 0  # verify each approved state lineage this often (0: never)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in POLICY_BOUNDS:
                if isinstance(value, bool) or not isinstance(value, int):
                    raise InvalidRequestError(f.name, "must be a whole number")
            elif f.name == "schema_coalescing_mode":
                if value not in tuple(CoalescingMode):
                    raise InvalidRequestError(f.name, "must be one of "
                                              + ", ".join(repr(m.value) for m in CoalescingMode))
                object.__setattr__(self, f.name, CoalescingMode(value))
            elif not isinstance(value, bool):
                raise InvalidRequestError(f.name, "must be true or false")

    def check_bounds(self) -> ProjectPolicy:
        """``self``, when every number is within ``POLICY_BOUNDS`` (what a change must
        meet; a stored document is used as it is)."""
        for name, (lo, hi) in POLICY_BOUNDS.items():
            if not lo <= getattr(self, name) <= hi:
                raise InvalidRequestError(name, f"must be a whole number from {lo} to {hi}")
        return self

    @classmethod
    def from_stored(cls, doc: Mapping[str, Any] | None) -> ProjectPolicy:
        """The effective policy of a stored document: its fields over the defaults, read
        as flow control and governance always read them (numbers as ``int``, flags as
        ``bool``, an unknown coalescing mode as ``none``); keys it does not know are
        ignored."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            if doc is None or doc.get(f.name) is None:
                continue
            value = doc[f.name]
            if f.name in POLICY_BOUNDS:
                values[f.name] = int(value)
            elif f.name == "schema_coalescing_mode":
                known = value in tuple(CoalescingMode)
                values[f.name] = CoalescingMode(value) if known else CoalescingMode.NONE
            else:
                values[f.name] = bool(value)
        return cls(**values)

    def as_json(self) -> dict[str, Any]:
        return {k: str(v) if isinstance(v, CoalescingMode) else v
                for k, v in asdict(self).items()}

    @staticmethod
    def changed(stored: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
        """The stored document with ``changes`` applied (``None`` puts a field back to its
        default); raises ``InvalidRequestError`` when the result is not a valid policy."""
        doc = {k: v for k, v in stored.items()}
        for key, value in changes.items():
            if value is None:
                doc.pop(key, None)
            else:
                doc[key] = value
        ProjectPolicy.from_stored(doc).check_bounds()
        return doc

    # --- flow control --------------------------------------------------------------

    def over_cap(self, rows: int, size: int) -> bool:
        """A lineage's staged backlog past a cap (backpressure pauses the device)."""
        return rows > self.max_pending_rows_per_lineage or size > self.max_pending_bytes_per_lineage

    def below_resume(self, rows: int, size: int) -> bool:
        """Both backlogs under the resume threshold (the device may send again)."""
        pct = self.resume_threshold_percent / 100
        return (rows < self.max_pending_rows_per_lineage * pct
                and size < self.max_pending_bytes_per_lineage * pct)
