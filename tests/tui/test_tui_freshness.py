"""The console's lineage detail shows the lineage's freshness (the API's three fields)."""

from __future__ import annotations

from edgesync.tui._lineage_detail import _summary, freshness_line


def test_the_lineage_detail_shows_freshness() -> None:
    lineage = {"id": "l-1", "device_name": "gw-1", "source_table": "t", "status": "active",
               "pause_reason": None, "freshness_seconds": 0.4321,
               "last_device_seen_at": "2026-04-28T09:00:00Z",
               "last_committed_at": "2026-04-28T09:00:00.432Z"}
    line = freshness_line(lineage)
    assert line.startswith("freshness: 0.4s · device saw: ") and "committed: " in line
    assert line in _summary(lineage).plain
    assert freshness_line({}) == "freshness: - · device saw: - · committed: -"
