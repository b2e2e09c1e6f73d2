"""Lineages: every (device, source table) of the project, a page at a time, with why the
paused ones wait. ``/`` searches on the server (``q=``), so it covers every page."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import DataTable, Static

from edgesync._vocabulary import LineageStatus
from edgesync.tui._confirm import AskScreen
from edgesync.tui._format import cell, pause_words, short_time
from edgesync.tui._screens import ScreenKind, new_screen, screen
from edgesync.tui._search import PAGE_SIZE, SearchScreen
from edgesync.tui._table import Table

__all__ = ["LineagesScreen"]

_STATUSES: list[str | None] = [None, "active", "paused"]
_COLUMNS = ["device", "table", "pipeline", "status", "pause reason", "staged", "row writes",
            "errors", "last batch"]


@screen(ScreenKind.LINEAGES)
class LineagesScreen(SearchScreen):
    TITLE = "Lineages"
    SEARCH_HINT = ("search device, table, target or pause reason; Enter applies, "
                   "Esc closes")
    BINDINGS = [
        Binding("f", "cycle_status", "status"),
        Binding("F", "fleet", "fleet…"),
        # D, as F for the fleet: d and w are the staged and written rows on the detail
        # screens (the reference's keys), one meaning per key across the console.
        Binding("D", "device", "device…"),
        Binding("n", "page(1)", "next page"),
        Binding("p", "page(-1)", "prev page"),
        Binding("2", "app.reviews", "reviews"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.shown = 0
        self.status: str | None = None
        self.fleet: tuple[str, str] | None = None  # (name, id)
        self.device: tuple[str, str] | None = None  # (name, id)
        self.rows: dict[str, dict[str, Any]] = {}

    def body(self) -> Iterable[Widget]:
        yield self.search_box()
        yield Static("", id="head", classes="head", markup=False)
        table = Table(id="main-table", cursor_type="row", zebra_stripes=True)
        table.add_columns(*_COLUMNS)
        yield table

    def on_screen_resume(self) -> None:
        if self.tui._api is not None:
            self.action_refresh()

    def feed_event(self, event: dict[str, Any]) -> None:
        """Any governance event may change a status or a counter: read the page again
        (not while the operator types a search)."""
        if not self.searching:
            self.action_refresh()

    async def reload(self) -> None:
        doc = await self.call(self.api.lineages, page=self.page, limit=PAGE_SIZE,
                              status=self.status, q=self.query_text or None,
                              fleet_id=self.fleet[1] if self.fleet else None,
                              device_id=self.device[1] if self.device else None)
        if doc is None:
            return
        self.total = int(doc["meta"]["total"])
        if not doc["data"] and self.page > 1:
            self.page = 1
            self.action_refresh()
            return
        table = self.query_one("#main-table", DataTable)
        cursor = table.cursor_row
        table.clear()
        self.rows = {}
        for item in doc["data"]:
            self.rows[item["id"]] = item
            table.add_row(
                cell(item["device_name"]), cell(item["source_table"]), cell(item["pipeline"]),
                Text(item["status"],
                     style="yellow" if item["status"] == LineageStatus.PAUSED else "green"),
                cell(pause_words(item["pause_reason"])), cell(item["staged_rows"]),
                cell(item["materialized_rows"]), cell(item["materialization_errors"]),
                cell(short_time(item.get("last_batch_at"))), key=item["id"])
        if doc["data"]:
            table.move_cursor(row=min(cursor, len(doc["data"]) - 1))
        # The count goes in the head, not the status line: a re-read after an event must
        # not wipe what the operator's last action said.
        self.shown = len(doc["data"])
        self.query_one("#head", Static).update(self._head())

    def _head(self) -> str:
        pages = self.pages
        parts = [f"page {self.page} of {pages}", f"{self.shown} of {self.total} lineages",
                 f"status: {self.status or 'all'}"]
        if self.fleet:
            parts.append(f"fleet: {self.fleet[0]}")
        if self.device:
            parts.append(f"device: {self.device[0]}")
        if self.query_text:
            parts.append(f"search: {self.query_text!r}")
        return " · ".join(parts)

    def action_cycle_status(self) -> None:
        self.status = _STATUSES[(_STATUSES.index(self.status) + 1) % len(_STATUSES)]
        self.page = 1
        self.action_refresh()

    def action_fleet(self) -> None:
        def answered(name: str | None) -> None:
            if name is not None:
                self.spawn(partial(self._set_fleet, name.strip()))

        self.app.push_screen(AskScreen("Only the lineages of the fleet named (empty: every "
                                       "fleet):", self.fleet[0] if self.fleet else ""),
                             answered)

    async def _set_fleet(self, name: str) -> None:
        if not name:
            self.fleet = None
        else:
            doc = await self.call(self.api.devices, limit=500)
            if doc is None:
                return
            ids = {d["fleet"]: d["fleet_id"] for d in doc["data"] if d.get("fleet")}
            if name not in ids:
                known = ", ".join(sorted(ids)) or "none"
                self.say(f"no fleet named {name!r} (fleets with devices: {known})", error=True)
                return
            self.fleet = (name, str(ids[name]))
        self.page = 1
        await self.reload()

    def action_device(self) -> None:
        def answered(name: str | None) -> None:
            if name is not None:
                self.spawn(partial(self._set_device, name.strip()))

        self.app.push_screen(AskScreen("Only the lineages of the device named (empty: every "
                                       "device):", self.device[0] if self.device else ""),
                             answered)

    async def _set_device(self, name: str) -> None:
        if not name:
            self.device = None
        else:
            doc = await self.call(self.api.devices, limit=500)
            if doc is None:
                return
            ids = {d["name"]: str(d["id"]) for d in doc["data"]}
            if name not in ids:
                near = sorted(n for n in ids if name.lower() in n.lower())[:5]
                self.say(f"no device named {name!r}"
                         + (f" (did you mean {', '.join(near)}?)" if near else ""), error=True)
                return
            self.device = (name, ids[name])
        self.page = 1
        await self.reload()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        lineage_id = event.row_key.value
        if lineage_id is not None:
            self.app.push_screen(new_screen(ScreenKind.LINEAGE_DETAIL, lineage_id))
