"""``ProjectPolicy``: the one model of a project's policy, its defaults and bounds."""

from __future__ import annotations

import dataclasses

import pytest

from edgesync.errors import InvalidRequestError
from edgesync.fleet import POLICY_BOUNDS, CoalescingMode, ProjectPolicy


def test_defaults() -> None:
    p = ProjectPolicy.from_stored(None)
    assert p == ProjectPolicy()
    assert p.as_json() == {
        "allow_additive_continue": False,
        "max_pending_rows_per_lineage": 100_000,
        "max_pending_bytes_per_lineage": 1 << 30,
        "resume_threshold_percent": 80,
        "materialization_breaker_threshold": 5,
        "schema_coalescing_mode": "none",
        "allow_auto_create_device_data_points": False,
        "verify_interval_seconds": 0,
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.resume_threshold_percent = 50  # type: ignore[misc]


def test_stored_documents_read_as_before() -> None:
    """Stored values are used as flow control and governance always read them: numbers
    as int (0 too: "always over the cap"), unknown keys ignored, an unknown mode none."""
    p = ProjectPolicy.from_stored({"max_pending_rows_per_lineage": 0, "surprise": 1,
                                   "schema_coalescing_mode": "fleet"})
    assert p.max_pending_rows_per_lineage == 0 and p.over_cap(1, 0)
    assert p.schema_coalescing_mode is CoalescingMode.FLEET
    assert ProjectPolicy.from_stored({"schema_coalescing_mode": "galaxy"}
                                     ).schema_coalescing_mode is CoalescingMode.NONE


def test_backlog_caps() -> None:
    p = ProjectPolicy(max_pending_rows_per_lineage=10, max_pending_bytes_per_lineage=1000,
                      resume_threshold_percent=80)
    assert not p.over_cap(10, 1000) and p.over_cap(11, 0) and p.over_cap(0, 1001)
    assert p.below_resume(7, 799) and not p.below_resume(8, 0)


def test_changes_are_checked() -> None:
    doc = ProjectPolicy.changed({"resume_threshold_percent": 70}, {
        "resume_threshold_percent": None, "schema_coalescing_mode": "project"})
    assert doc == {"schema_coalescing_mode": "project"}
    lo, hi = POLICY_BOUNDS["resume_threshold_percent"]
    with pytest.raises(InvalidRequestError) as info:
        ProjectPolicy.changed({}, {"resume_threshold_percent": hi + 1})
    assert info.value.field == "resume_threshold_percent" and f"{lo} to {hi}" in info.value.reason
    with pytest.raises(InvalidRequestError) as info:
        ProjectPolicy(allow_additive_continue="yes")  # type: ignore[arg-type]
    assert info.value.field == "allow_additive_continue"
