"""Staged and written rows of one lineage in one table: staged operations waiting in
staging, or what the cloud wrote (the state mirror, or the telemetry table)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import DataTable, Static

from edgesync.client import ApiClientError
from edgesync.tui._base import ApiScreen
from edgesync.tui._format import cell

__all__ = ["RowsScreen", "decoded_rows"]

PAGE_SIZE = 50
# Why a written view can be empty: nothing approved (or provisioned) yet.
_NOT_YET = frozenset({"MIRROR_NOT_PROVISIONED", "TELEMETRY_NOT_PROVISIONED"})


def decoded_rows(items: list[dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    """Staged operations as flat rows: the row batch's ``row`` (or, for a delete, its
    ``pk``) spread into columns after the staging fields; telemetry samples already carry
    their columns at the top level. Returns (columns, rows)."""
    flat = []
    for item in items:
        out = {k: v for k, v in item.items() if k not in ("row", "pk", "schema_hash")}
        values = item.get("row") if isinstance(item.get("row"), dict) else item.get("pk")
        if isinstance(values, dict):
            out.update({k: v for k, v in values.items() if k not in out})
        flat.append(out)
    return list(dict.fromkeys(k for r in flat for k in r)), flat


class RowsScreen(ApiScreen):
    TITLE = "Rows"
    BINDINGS = [
        Binding("s", "mode('staged')", "staged"),
        Binding("w", "mode('written')", "written"),
        Binding("n", "page(1)", "next page"),
        Binding("p", "page(-1)", "prev page"),
    ]

    def __init__(self, lineage: dict[str, Any], mode: str) -> None:
        super().__init__()
        self.lineage = lineage
        self.mode = mode
        self.page = 1
        self.total = 0

    def body(self) -> Iterable[Widget]:
        yield Static("", id="head", classes="head", markup=False)
        table: DataTable[Text] = DataTable(id="main-table", cursor_type="row",
                                           zebra_stripes=True)
        yield table

    @property
    def source(self) -> str:
        """What the table shows, in the header's words."""
        target = self.lineage.get("target_table") or "not provisioned"
        if self.mode == "staged":
            return "staged rows (edge_staged_rows)"
        if self.lineage["pipeline"] == "telemetry":
            return f"written: telemetry {target}"
        return f"written: state mirror {target}"

    def _fetch(self) -> dict[str, Any]:
        lid = self.lineage["id"]
        paging = {"page": self.page, "limit": PAGE_SIZE}
        if self.mode == "staged":
            return self.api.get_page(f"/edge/lineages/{lid}/staged-rows", **paging)
        if self.lineage["pipeline"] == "telemetry":
            return self.api.telemetry(lid, **paging)
        return self.api.get_page(f"/edge/lineages/{lid}/mirror-rows", **paging)

    async def reload(self) -> None:
        table = self.query_one("#main-table", DataTable)
        try:
            doc = await self.call(self._fetch, raise_codes=_NOT_YET)
        except ApiClientError as exc:
            table.clear(columns=True)
            self.total = 0
            self._head("nothing written yet")
            self.say(f"{exc.code}: {exc.message}", error=True)
            return
        if doc is None:
            return
        self.total = int(doc["meta"]["total"])
        columns, rows = decoded_rows(doc["data"]) if self.mode == "staged" else (
            list(dict.fromkeys(k for r in doc["data"] for k in r)), doc["data"])
        table.clear(columns=True)
        table.add_columns(*columns)
        for r in rows:
            table.add_row(*(cell(r.get(c), 40) for c in columns))
        self._head(f"{self.total} rows")
        self.say(f"{len(rows)} rows on this page")

    def _head(self, count: str) -> None:
        pages = max(1, -(-self.total // PAGE_SIZE))
        name = f"{self.lineage['device_name']} / {self.lineage['source_table']}"
        self.query_one("#head", Static).update(
            f"{name} · source: {self.source} · page {self.page} of {pages} · {count}")

    def action_mode(self, mode: str) -> None:
        if mode != self.mode:
            self.mode = mode
            self.page = 1
            self.action_refresh()

    def action_page(self, step: int) -> None:
        pages = max(1, -(-self.total // PAGE_SIZE))
        page = min(max(1, self.page + step), pages)
        if page != self.page:
            self.page = page
            self.action_refresh()
