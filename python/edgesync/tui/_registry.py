"""Registry coalescing: registry reviews (one schema decision for every device of the
project or fleet that sends it), each with its waiting devices, and the coalesced mirrors
with consolidation of device tables into them. ``/`` searches both lists on the server
(``q=``), so it covers every page."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Any

from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import DataTable, Static

from edgesync.tui._confirm import AskScreen
from edgesync.tui._format import cell, short_time
from edgesync.tui._review_detail import ReviewDetailScreen
from edgesync.tui._reviews import FILTERS
from edgesync.tui._screens import ScreenKind, new_screen, screen
from edgesync.tui._search import PAGE_SIZE, SearchScreen
from edgesync.tui._table import Table

__all__ = ["RegistryReviewScreen", "RegistryScreen", "consolidation_words"]


def consolidation_words(result: dict[str, Any]) -> str:
    moved = result.get("consolidated") or []
    skipped = result.get("skipped") or []
    words = f"{result.get('source_table')}: moved {len(moved)} lineages"
    if moved:
        words += f" ({sum(int(m['rows_copied']) for m in moved)} rows copied)"
    if skipped:
        reasons = sorted({str(s["reason"]) for s in skipped})
        words += f", skipped {len(skipped)} ({', '.join(reasons)})"
    return words


@screen(ScreenKind.REGISTRY)
class RegistryScreen(SearchScreen):
    FILTERS = FILTERS
    TITLE = "Registry"
    SEARCH_HINT = ("search table, schema hash, classification, claimer, decider, reason or "
                   "device; Enter applies, Esc closes")
    BINDINGS = [
        Binding("f", "cycle_filter", "status filter"),
        Binding("C", "consolidate", "consolidate…"),
        Binding("n", "page(1)", "next page"),
        Binding("p", "page(-1)", "prev page"),
    ]

    def body(self) -> Iterable[Widget]:
        yield self.search_box()
        yield Static("", id="head", classes="head", markup=False)
        reviews = Table(id="main-table", cursor_type="row", zebra_stripes=True)
        reviews.add_columns("created", "scope", "table", "pipeline", "status", "registry",
                            "version", "target")
        yield reviews
        yield Static("Coalesced mirrors", classes="section")
        mirrors = Table(id="mirrors", cursor_type="row")
        mirrors.add_columns("target table", "scope", "source table", "pipeline", "devices",
                            "schema hashes")
        yield mirrors

    def on_screen_resume(self) -> None:
        self.action_refresh()

    def feed_event(self, event: dict[str, Any]) -> None:
        if "registry" in str(event.get("type", "")) and not self.searching:
            self.action_refresh()

    def _fetch(self) -> tuple[dict[str, Any], dict[str, Any]]:
        status = self.filter_status
        q = self.query_text or None
        return (self.api.registry_reviews(status=status, page=self.page, limit=PAGE_SIZE, q=q),
                self.api.coalesced_mirrors(limit=PAGE_SIZE, q=q))

    async def reload(self) -> None:
        got = await self.call(self._fetch)
        if got is None:
            return
        reviews, mirrors = got
        self.total = int(reviews["meta"]["total"])
        table = self.query_one("#main-table", DataTable)
        table.clear()
        for r in reversed(reviews["data"]):
            table.add_row(cell(short_time(r["created_at"])), cell(r["scope"]),
                          cell(r["source_table"]), cell(r["pipeline"]), cell(r["status"]),
                          cell(r["registry_status"]), cell(r["action_version"]),
                          cell(r["target_table"]), key=r["id"])
        mtable = self.query_one("#mirrors", DataTable)
        mtable.clear()
        for m in mirrors["data"]:
            mtable.add_row(cell(m["target_table"]), cell(m["scope"]), cell(m["source_table"]),
                           cell(m["pipeline"]), cell(m["device_count"]),
                           cell(", ".join(h[:12] for h in m["schema_hashes"])),
                           key=m["source_table"])
        pages = self.pages
        self.query_one("#head", Static).update(
            f"registry reviews · filter: {self.filter_label} (f cycles) · "
            f"page {self.page} of {pages} · {len(reviews['data'])} of {self.total} reviews · "
            f"{mirrors['meta']['total']} coalesced mirrors"
            + (f" · search: {self.query_text!r}" if self.query_text else ""))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "main-table" and event.row_key.value is not None:
            self.app.push_screen(RegistryReviewScreen(event.row_key.value))

    def action_consolidate(self) -> None:
        mirrors = self.query_one("#mirrors", DataTable)
        suggested = ""
        if mirrors.row_count:
            key = mirrors.coordinate_to_cell_key(mirrors.cursor_coordinate).row_key.value
            suggested = str(key or "")

        def answered(table: str | None) -> None:
            if table:
                self.spawn(partial(self._consolidate, table.strip()))

        self.app.push_screen(AskScreen("Consolidate which source table into its coalesced "
                                       "mirror (device tables approved before coalescing "
                                       "move in; old tables are kept)?", suggested), answered)

    async def _consolidate(self, table: str) -> None:
        result = await self.call(self.api.consolidate, table)
        if result is not None:
            await self.reload()
            self.say(consolidation_words(result))


class RegistryReviewScreen(ReviewDetailScreen):
    TITLE = "Registry review"
    BINDINGS = [Binding("b", "abandon", "abandon…")]

    device_names: dict[str, str] | None = None

    def fetch(self, review_id: str) -> Any:
        review = self.api.registry_review(review_id)
        if not self.device_names:
            self.device_names = {d["id"]: d["name"] for d in self.api.devices(limit=500)["data"]}
        return review

    def claim_call(self, review_id: str, version: int) -> Any:
        return self.api.decide_registry_review(review_id, "claim", version)

    def approve_call(self, review_id: str, version: int, actions: list[dict[str, Any]],
                     sync_authority: str | None) -> Any:
        return self.api.decide_registry_review(review_id, "approve", version,
                                               column_actions=actions)

    def reject_call(self, review_id: str, version: int, reason: str | None) -> Any:
        return self.api.decide_registry_review(review_id, "reject", version, reason=reason)

    def abandon_call(self, review_id: str, version: int, reason: str | None) -> Any:
        return self.api.decide_registry_review(review_id, "abandon", version, reason=reason)

    def approve_form(self, review: dict[str, Any]) -> Any:
        return new_screen(ScreenKind.APPROVE, review, registry=True)

    async def reload(self) -> None:
        await super().reload()
        if self.review is None:
            return
        scroll = self.query_one(VerticalScroll)
        if not self.query("#devices"):  # the waiting devices, under the columns
            await scroll.mount(Static("Waiting devices", classes="section"))
            devices = Table(id="devices", cursor_type="row")
            devices.add_columns("device", "lineage", "schema version status")
            await scroll.mount(devices)
        table = self.query_one("#devices", DataTable)
        table.clear()
        names = self.device_names or {}
        for d in self.review.get("devices") or []:
            table.add_row(cell(names.get(d["device_id"], d["device_id"])),
                          cell(d["lineage_id"]), cell(d["status"]))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "abandon":
            return bool(self.review and self.review["status"] in ("queued", "in_review"))
        return super().check_action(action, parameters)

    def action_abandon(self) -> None:
        def reason(text_: str | None) -> None:
            if text_ is not None:
                self.spawn(partial(self.decide, self.abandon_call, text_ or None,
                                   done="abandoned: each waiting device gets its own review"))

        self.app.push_screen(AskScreen("Abandon: give this schema back to per-device "
                                       "reviews. Reason:"), reason)
