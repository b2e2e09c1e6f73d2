"""Screens open one another by kind (``tui._screens``), not by importing each other: once
the console is imported, every kind has its screen."""

from __future__ import annotations

import edgesync.tui  # noqa: F401  (the console imports every screen module)
from edgesync.tui._lineage_detail import LineageDetailScreen
from edgesync.tui._screens import ScreenKind, new_screen, unregistered


def test_every_kind_of_screen_is_registered() -> None:
    assert unregistered() == set()


def test_a_new_screen_of_a_kind_is_built_with_its_arguments() -> None:
    made = new_screen(ScreenKind.LINEAGE_DETAIL, "0190c0de-0000-7000-8000-000000000001")
    assert isinstance(made, LineageDetailScreen)
    assert made.lineage_id == "0190c0de-0000-7000-8000-000000000001"
