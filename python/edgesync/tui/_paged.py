"""A list screen that reads the API a page at a time: ``page`` of ``pages`` (``total``
set by its ``reload``), ``n`` / ``p`` move."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType

from edgesync.tui._base import ApiScreen

__all__ = ["PAGE_SIZE", "PagedScreen"]

PAGE_SIZE = 50  # rows a list screen asks the API for at a time


class PagedScreen(ApiScreen):
    PAGE_BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "page(1)", "next page"),
        Binding("p", "page(-1)", "prev page"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.page = 1
        self.total = 0

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // PAGE_SIZE))

    def action_page(self, step: int) -> None:
        page = min(max(1, self.page + step), self.pages)
        if page != self.page:
            self.page = page
            self.action_refresh()
