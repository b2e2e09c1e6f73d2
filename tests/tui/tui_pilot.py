"""Driving the console in the tests: wait (bounded polls, never timed assertions) for what
the screens show, read their tables, pick a row with the arrow keys."""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import DataTable, Static

from edgesync.tui._base import ApiScreen

__all__ = ["cells", "current_key", "open_row", "rows", "screen_text", "shot", "until"]

S = TypeVar("S", bound=Screen[Any])


async def until(pilot: Pilot[Any], probe: Callable[[], Any], what: str, *,
                limit: float = 60.0, refresh: bool = False,
                between: Callable[[], Awaitable[None]] | None = None) -> Any:
    """Let the app run until ``probe()`` is truthy. ``refresh`` presses r on each round
    (the screens read the API when asked, they do not poll); ``between`` runs each round.
    The limit is a safety net, not a speed assertion: CI shares 2 cores with PostgreSQL,
    the broker, the worker and a browser, and 30 s ran out there now and then."""
    deadline = time.monotonic() + limit
    rounds = 0
    while True:
        await pilot.pause(0.05)
        value = probe()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not shown within {limit:.0f}s " \
                                            f"(screen: {screen_text(pilot.app.screen)!r:.600})"
        rounds += 1
        if refresh and rounds % 6 == 0:
            await pilot.press("r")
        if between is not None:
            await between()


def on(pilot: Pilot[Any], kind: type[S]) -> S | None:
    screen = pilot.app.screen
    return screen if isinstance(screen, kind) else None


def composed(pilot: Pilot[Any], kind: type[S]) -> S | None:
    """The current screen if it is a ``kind`` and has drawn its text (``plain``)."""
    screen = on(pilot, kind)
    return screen if screen is not None and getattr(screen, "plain", "") else None


def cells(table: DataTable[Any], key: str) -> list[str]:
    return [str(c) for c in table.get_row(key)]


def rows(table: DataTable[Any]) -> dict[str, list[str]]:
    """Every row by key (``#i`` for a row added without one), its cells as plain text, in
    display order."""
    out = {}
    for i, row in enumerate(table.ordered_rows):
        key = row.key.value if row.key.value is not None else f"#{i}"
        out[str(key)] = [str(c) for c in table.get_row_at(i)]
    return out


def column_names(table: DataTable[Any]) -> list[str]:
    return [str(c.label) for c in table.columns.values()]


def current_key(table: DataTable[Any]) -> str | None:
    if not table.row_count:
        return None
    value = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
    return None if value is None else str(value)


async def open_row(pilot: Pilot[Any], table: DataTable[Any], key: str, *,
                   enter: bool = True) -> None:
    """Move the cursor to the row ``key`` (as ``rows`` names it) with ↑/↓, then Enter."""
    keys = list(rows(table))  # a row added without a key is "#i"
    table.focus()
    await pilot.pause()
    step = keys.index(key) - table.cursor_row
    for _ in range(abs(step)):
        await pilot.press("down" if step > 0 else "up")
    assert table.cursor_row == keys.index(key)
    if enter:
        await pilot.press("enter")


def shot(pilot: Pilot[Any], name: str) -> None:
    """With ``EDGESYNC_TUI_SCREENSHOTS=DIR``, save the screen as DIR/name.svg (how the
    screenshots of docs/tui.md are made: that variable, then the story test)."""
    where = os.environ.get("EDGESYNC_TUI_SCREENSHOTS")
    if where:
        pilot.app.save_screenshot(f"{name}.svg", path=where)


def screen_text(screen: Screen[Any]) -> str:
    """The plain text of a screen's Static widgets (head, summary, status lines)."""
    parts = []
    for w in screen.query(Static):
        parts.append(str(w.render()))
    return "\n".join(parts)


def status(screen: Screen[Any]) -> str:
    return screen.status_text if isinstance(screen, ApiScreen) else ""
