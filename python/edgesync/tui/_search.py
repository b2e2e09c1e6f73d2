"""``/`` on a list screen: a search box the API filters by (``q=``), so the search covers
every page, not only the one shown. Enter applies it, Esc closes the box."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Input

from edgesync.tui._paged import PAGE_SIZE, PagedScreen

__all__ = ["PAGE_SIZE", "SearchScreen"]


class SearchScreen(PagedScreen):
    """A list screen with a search box (``#filter``, yielded first by ``body``); the
    text is ``query_text``, read by ``reload``. It pages (``page`` of ``pages``, ``total``
    set by ``reload``) and, with ``FILTERS`` (status, label), cycles a status filter."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("slash", "filter", "filter")]
    SEARCH_HINT = "search; Enter applies, Esc closes"
    FILTERS: ClassVar[Sequence[tuple[str | None, str]]] = ((None, "All"),)

    def __init__(self) -> None:
        super().__init__()
        self.query_text = ""
        self.filter_index = 0

    @property
    def filter_status(self) -> str | None:
        return self.FILTERS[self.filter_index][0]

    @property
    def filter_label(self) -> str:
        return self.FILTERS[self.filter_index][1]

    def action_cycle_filter(self) -> None:
        self.filter_index = (self.filter_index + 1) % len(self.FILTERS)
        self.page = 1
        self.action_refresh()

    def search_box(self) -> Input:
        return Input(placeholder=self.SEARCH_HINT, id="filter")

    @property
    def searching(self) -> bool:
        """The operator is typing a search (re-reads would get in the way)."""
        return self.query_one("#filter", Input).has_class("shown")

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("shown")
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_text = event.value.strip()
        self.page = 1
        self._close_filter()
        self.action_refresh()

    def _close_filter(self) -> None:
        self.query_one("#filter", Input).remove_class("shown")
        self.query_one("#main-table", DataTable).focus()

    def action_back(self) -> None:
        if self.searching:
            self._close_filter()
            return
        super().action_back()
