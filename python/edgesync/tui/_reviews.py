"""Schema reviews of the project; ``f`` cycles the status shown."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import DataTable, Static

from edgesync.tui._format import cell, short_time
from edgesync.tui._screens import ScreenKind, new_screen, screen
from edgesync.tui._search import PAGE_SIZE, SearchScreen
from edgesync.tui._table import Table

__all__ = ["FILTERS", "ReviewsScreen"]

# Open first, as the console: what waits for an operator.
FILTERS: list[tuple[str | None, str]] = [
    ("open", "Open (queued or in review)"), (None, "All"), ("queued", "Queued"),
    ("in_review", "In review"), ("approved", "Approved"), ("rejected", "Rejected"),
    ("abandoned", "Abandoned")]
_STATUS_STYLE = {"queued": "yellow", "in_review": "cyan", "approved": "green",
                 "rejected": "red", "abandoned": "dim"}


@screen(ScreenKind.REVIEWS)
class ReviewsScreen(SearchScreen):
    FILTERS = FILTERS
    TITLE = "Schema reviews"
    SEARCH_HINT = "search device, table, classification, claimer or decider; Enter applies"
    BINDINGS = [
        Binding("f", "cycle_filter", "status filter"),
        Binding("n", "page(1)", "next page"),
        Binding("p", "page(-1)", "prev page"),
        Binding("1", "app.lineages", "lineages"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.device_names: dict[str, str] = {}

    def body(self) -> Iterable[Widget]:
        yield self.search_box()
        yield Static("", id="head", classes="head", markup=False)
        table = Table(id="main-table", cursor_type="row", zebra_stripes=True)
        table.add_columns("created", "device", "table", "classification", "status",
                          "version", "claimed by", "decided by")
        yield table

    def on_screen_resume(self) -> None:
        self.action_refresh()

    def feed_event(self, event: dict[str, Any]) -> None:
        if "review" in str(event.get("type", "")) and not self.searching:
            self.action_refresh()

    def _fetch(self) -> dict[str, Any]:
        if not self.device_names:
            devices = self.api.devices(limit=500)["data"]
            self.device_names = {d["id"]: d["name"] for d in devices}
        status = self.filter_status
        doc: dict[str, Any] = self.api.reviews(status=status, page=self.page, limit=PAGE_SIZE,
                                               q=self.query_text or None)
        return doc

    async def reload(self) -> None:
        doc = await self.call(self._fetch)
        if doc is None:
            return
        self.total = int(doc["meta"]["total"])
        table = self.query_one("#main-table", DataTable)
        table.clear()
        # Newest first: the API lists oldest first, and the newest is what needs a decision.
        for r in reversed(doc["data"]):
            table.add_row(
                cell(short_time(r["created_at"])),
                cell(self.device_names.get(r["device_id"], r["device_id"][:8])),
                cell(r["source_table"]), cell(r["classification"]),
                Text(r["status"], style=_STATUS_STYLE.get(r["status"], "")),
                cell(r["action_version"]), cell(r["claimed_by"]), cell(r["decided_by"]),
                key=r["id"])
        pages = self.pages
        self.query_one("#head", Static).update(
            f"filter: {self.filter_label} (f cycles) · page {self.page} of {pages} · "
            f"{len(doc['data'])} of {self.total} reviews"
            + (f" · search: {self.query_text!r}" if self.query_text else ""))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.app.push_screen(new_screen(ScreenKind.REVIEW_DETAIL, event.row_key.value))
