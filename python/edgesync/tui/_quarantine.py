"""Quarantined rows of one lineage (``…/quarantine``, docs/recovery.md): rows the cloud
could not write, with why; retry one as it is or with values edited, retry all, discard
one or all. ``/`` searches them on the server (``q=``: reason, field, op, the row's key and
values), so it covers every page."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Any

import orjson
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import DataTable, Static

from edgesync._vocabulary import Pipeline
from edgesync.tui._confirm import AskScreen, ConfirmScreen
from edgesync.tui._format import cell, short_time
from edgesync.tui._screens import ScreenKind, screen
from edgesync.tui._search import PAGE_SIZE, SearchScreen
from edgesync.tui._table import Table

__all__ = ["STATUS_FILTERS", "QuarantineScreen", "editable_values"]

STATUS_FILTERS: list[tuple[str | None, str]] = [
    ("open", "Open"), (None, "All"), ("superseded", "Superseded"), ("retried", "Retried")]


def editable_values(row: dict[str, Any]) -> dict[str, Any] | None:
    """What edit-and-retry may change: the values of a state row's ``row`` object without
    its key, or a telemetry sample's ``fields``; None for a quarantined delete."""
    doc = row.get("row") or {}
    if row.get("pipeline") == Pipeline.TELEMETRY:
        fields = doc.get("fields")
        return dict(fields) if isinstance(fields, dict) else None
    values = doc.get("row")
    if not isinstance(values, dict):
        return None
    key = doc.get("pk") or {}
    return {k: v for k, v in values.items() if k not in key}


@screen(ScreenKind.QUARANTINE)
class QuarantineScreen(SearchScreen):
    FILTERS = STATUS_FILTERS
    TITLE = "Quarantine"
    SEARCH_HINT = ("search reason code, reason, field, op or the row's key and values; "
                   "Enter applies, Esc closes")
    BINDINGS = [
        Binding("f", "cycle_filter", "status filter"),
        Binding("t", "retry", "retry row"),
        Binding("e", "edit", "edit values and retry…"),
        Binding("T", "retry_all", "retry all open rows"),
        Binding("x", "discard(False)", "discard row…"),
        Binding("X", "discard(True)", "discard all…"),
        Binding("n", "page(1)", "next page"),
        Binding("p", "page(-1)", "prev page"),
    ]

    def __init__(self, lineage: dict[str, Any]) -> None:
        super().__init__()
        self.lineage = lineage
        self.shown: list[dict[str, Any]] = []

    @property
    def lineage_id(self) -> str:
        return str(self.lineage["id"])

    def body(self) -> Iterable[Widget]:
        yield self.search_box()
        yield Static("", id="head", classes="head", markup=False)
        table = Table(id="main-table", cursor_type="row", zebra_stripes=True)
        table.add_columns("id", "status", "seq / ts", "op", "key", "reason code", "field",
                          "reason", "attempts", "quarantined")
        yield table

    async def reload(self) -> None:
        status = self.filter_status
        doc = await self.call(self.api.quarantine, self.lineage_id, status=status,
                              page=self.page, limit=PAGE_SIZE, q=self.query_text or None)
        if doc is None:
            return
        self.total = int(doc["meta"]["total"])
        self.shown = list(doc["data"])
        table = self.query_one("#main-table", DataTable)
        table.clear()
        for r in self.shown:
            obj = r.get("row") or {}
            state = r["pipeline"] == Pipeline.ROWS
            table.add_row(
                cell(r["id"]), cell(r["status"]),
                cell(r["commit_seq"] if state else short_time(r["event_ts"])),
                cell(r["op"] if state else "sample"),
                cell(obj.get("pk") if state else r["row_id"], 30), cell(r["reason_code"]),
                cell(r["reason_field"]), cell(r["reason"], 50), cell(r["attempts"]),
                cell(short_time(r["quarantined_at"])), key=str(r["id"]))
        pages = self.pages
        name = f"{self.lineage['device_name']} / {self.lineage['source_table']}"
        self.query_one("#head", Static).update(
            f"{name} · quarantined rows · filter: {self.filter_label} · {self.total} rows · "
            f"page {self.page} of {pages}"
            + (f" · search: {self.query_text!r}" if self.query_text else ""))

    def feed_event(self, event: dict[str, Any]) -> None:
        if str((event.get("body") or {}).get("lineage_id")) == self.lineage_id and \
                "quarantine" in str(event.get("type", "")) and not self.searching:
            self.action_refresh()

    def _selected(self) -> dict[str, Any] | None:
        table = self.query_one("#main-table", DataTable)
        if not self.shown or not table.row_count:
            self.say("no quarantined row selected", error=True)
            return None
        return self.shown[table.cursor_row]

    def action_retry(self) -> None:
        row = self._selected()
        if row is not None:
            self.spawn(partial(self._retry, row, None))

    def action_edit(self) -> None:
        row = self._selected()
        if row is None:
            return
        values = editable_values(row)
        if values is None:
            self.say("a quarantined delete has no values to edit: t retries it as it is",
                     error=True)
            return
        part = ("fields" if row["pipeline"] == Pipeline.TELEMETRY
                else "row values (the key stays)")
        question = (f"New {part} for quarantined row {row['id']} — JSON, as the device "
                    f"would send them; Enter retries.\nWhy it was refused: "
                    f"{row['reason_code']}: {row['reason']}")

        def answered(answer: str | None) -> None:
            if answer is None:
                self.say("edit cancelled")
                return
            try:
                doc = orjson.loads(answer)
            except orjson.JSONDecodeError as exc:
                self.say(f"not JSON: {exc}", error=True)
                return
            if not isinstance(doc, dict):
                self.say('expected a JSON object, {"column": value, …}', error=True)
                return
            self.spawn(partial(self._retry, row, doc))

        self.app.push_screen(AskScreen(question, orjson.dumps(values).decode()), answered)

    async def _retry(self, row: dict[str, Any], values: dict[str, Any] | None) -> None:
        out = await self.call(self.api.retry_quarantined, self.lineage_id, int(row["id"]),
                              values=values)
        if out is None:
            return
        await self.reload()
        if out["written"]:
            self.say(f"row {row['id']} written (retried)")
        else:
            self.say(f"row {row['id']} refused again, still quarantined: "
                     f"{out['reason_code']}: {out['reason']}", error=True)

    def action_retry_all(self) -> None:
        self.spawn(self._retry_all)

    async def _retry_all(self) -> None:
        out = await self.call(self.api.retry_quarantined, self.lineage_id)
        if out is not None:
            await self.reload()
            self.say(f"retried all: {out['retried']} written, {out['failed']} refused again, "
                     f"{out['superseded']} superseded", error=bool(out["failed"]))

    def action_discard(self, every: bool) -> None:
        row = None if every else self._selected()
        if not every and row is None:
            return
        what = (f"every quarantined row of {self.lineage['source_table']}" if every
                else f"quarantined row {row['id'] if row else ''}")
        if every and self.query_text:
            what += f" (any status, not only those matching the search {self.query_text!r})"
        self.app.push_screen(
            ConfirmScreen(f"Discard {what} for good?\n\nThe batch's ledger row stays, so a "
                          "redelivery is still a duplicate."),
            partial(self._confirmed_discard, row))

    def _confirmed_discard(self, row: dict[str, Any] | None, yes: bool | None) -> None:
        if yes:
            self.spawn(partial(self._discard, row))
        else:
            self.say("discard cancelled")

    async def _discard(self, row: dict[str, Any] | None) -> None:
        out = await self.call(self.api.discard_quarantined, self.lineage_id,
                              None if row is None else int(row["id"]))
        if out is not None:
            await self.reload()
            self.say(f"{out['discarded_rows']} quarantined row(s) discarded")
