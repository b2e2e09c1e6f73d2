"""Events: the project's governance events as they happen (the SSE stream), newest
first — reviews queued and decided, lineages paused and resumed, replays done. ``/``
keeps those whose type or subject contains the text (the console holds them all)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.text import Text
from textual.widget import Widget
from textual.widgets import DataTable, Static

from edgesync.tui._format import cell, short_time
from edgesync.tui._screens import ScreenKind, screen
from edgesync.tui._search import SearchScreen
from edgesync.tui._table import Table

__all__ = ["EventsScreen", "event_words"]

_PREFIXES = ("integration.edge_", "edgesync.")


def event_words(event: dict[str, Any]) -> tuple[str, str]:
    """(short type, what it is about) of an event: ``schema_review.queued`` and the body's
    table, lineage, review and reason fields that are present."""
    kind = str(event.get("type", ""))
    for prefix in _PREFIXES:
        kind = kind.removeprefix(prefix)
    kind = kind.removesuffix(".v1")
    body = event.get("body") or {}
    parts = [f"{k}={body[k]}" for k in ("source_table", "reason", "pause_reason",
                                        "classification", "rows_replayed", "error")
             if body.get(k) is not None]
    for k in ("lineage_id", "review_id"):
        if body.get(k):
            parts.append(f"{k.removesuffix('_id')} {str(body[k])[:8]}")
    return kind, " ".join(parts)


def _matches(event: dict[str, Any], text: str) -> bool:
    return not text or text.lower() in " ".join(event_words(event)).lower()


@screen(ScreenKind.EVENTS)
class EventsScreen(SearchScreen):
    TITLE = "Events"
    SEARCH_HINT = "keep the events whose type or subject contains this; Enter applies"

    def body(self) -> Iterable[Widget]:
        yield self.search_box()
        yield Static("", id="head", classes="head", markup=False)
        table = Table(id="main-table", cursor_type="row", zebra_stripes=True)
        table.add_columns("id", "time", "event", "about")
        yield table

    async def reload(self) -> None:
        table = self.query_one("#main-table", DataTable)
        table.clear()
        for event in reversed(self.tui.events):
            if _matches(event, self.query_text):
                self._add(table, event, top=False)
        self._head()

    def _head(self) -> None:
        feed = self.tui.feed_state
        self.query_one("#head", Static).update(
            f"live from {self.tui.settings.api_url} · {len(self.tui.events)} events since "
            f"the console started · stream: {feed}"
            + (f" · search: {self.query_text!r}" if self.query_text else ""))

    def _add(self, table: DataTable[Text], event: dict[str, Any], *, top: bool) -> None:
        kind, about = event_words(event)
        row = (cell(event.get("id")), cell(short_time(event.get("created_at"))),
               Text(kind, style="bold"), cell(about, 100))
        if top and table.row_count:
            # DataTable appends; keep newest first by rebuilding (a few hundred rows at most)
            self.spawn(self.reload, group="reload", exclusive=True)
        else:
            table.add_row(*row)

    def feed_event(self, event: dict[str, Any]) -> None:
        if _matches(event, self.query_text):
            self._add(self.query_one("#main-table", DataTable), event, top=True)
        self._head()
