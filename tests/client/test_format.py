"""The CLI's tables: durations in their unit (issue 27: ``FRESH (S)`` printed
``0.031781911849975586``)."""

from __future__ import annotations

import io

import pytest

from edgesync.cli._format import duration, print_table


@pytest.mark.parametrize("seconds, shown", [
    (0.031781911849975586, "0.0 s"), (9.94, "9.9 s"), (12.4, "12 s"), (89, "89 s"),
    (180, "3 min"), (5 * 3600, "5 h"), (3 * 86400, "3 d"), (None, "-")])
def test_duration(seconds: float | None, shown: str) -> None:
    assert duration(seconds) == shown


def test_duration_columns_are_shown_in_their_unit() -> None:
    out = io.StringIO()
    print_table([{"table": "t", "freshness_seconds": 0.0317, "oldest_unconfirmed_age_s": 200,
                  "staged_rows": 12}],
                [("table", "table"), ("freshness_seconds", "fresh"),
                 ("oldest_unconfirmed_age_s", "oldest unconfirmed"), ("staged_rows", "staged")],
                out)
    assert out.getvalue().splitlines() == [
        "TABLE  FRESH  OLDEST UNCONFIRMED  STAGED",
        "t      0.0 s  3 min               12"]
