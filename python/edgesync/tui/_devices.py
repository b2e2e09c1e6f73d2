"""Devices: the project's devices, a page at a time, with their presence, their agent and
what their batches cost on the wire (bytes as received, as JSON, and the ratio: how much
compressed batches save on a billed link)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.text import Text
from textual.widget import Widget
from textual.widgets import DataTable, Static

from edgesync.tui._format import cell, short_time
from edgesync.tui._paged import PAGE_SIZE, PagedScreen
from edgesync.tui._screens import ScreenKind, screen
from edgesync.tui._table import Table

__all__ = ["DevicesScreen", "traffic_words"]

_COLUMNS = ["device", "fleet", "connected", "agent", "last batch", "batches received",
            "as JSON", "wire / JSON"]


def _size(n: int | None) -> str:
    if not n:
        return "-"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def traffic_words(device: dict[str, Any]) -> tuple[str, str, str]:
    """(received, as JSON, ratio) of a device's batches, as the table shows them."""
    ratio = device.get("compression_ratio")
    shown = "-" if ratio is None else "plain" if ratio >= 1 else f"{ratio * 100:.1f} %"
    return (_size(device.get("batch_bytes_received")), _size(device.get("batch_bytes_json")),
            shown)


@screen(ScreenKind.DEVICES)
class DevicesScreen(PagedScreen):
    TITLE = "Devices"
    BINDINGS = PagedScreen.PAGE_BINDINGS

    def body(self) -> Iterable[Widget]:
        yield Static("", id="head", classes="head", markup=False)
        table = Table(id="main-table", cursor_type="row", zebra_stripes=True)
        table.add_columns(*_COLUMNS)
        yield table

    def on_screen_resume(self) -> None:
        if self.tui._api is not None:
            self.action_refresh()

    async def reload(self) -> None:
        doc = await self.call(self.api.devices, page=self.page, limit=PAGE_SIZE)
        if doc is None:
            return
        self.total = int(doc["meta"]["total"])
        table = self.query_one("#main-table", DataTable)
        table.clear()
        for d in doc["data"]:
            connected = ("revoked" if d.get("revoked_at") else
                         "yes" if d.get("connected") else "no")
            agent = d.get("agent_state") or "-"
            if d.get("agent_version"):
                agent += f" {d['agent_version']}"
            table.add_row(cell(d["name"]), cell(d.get("fleet")),
                          Text(connected, style="green" if connected == "yes" else "yellow"),
                          cell(agent), cell(short_time(d.get("last_batch_at"))),
                          *map(cell, traffic_words(d)), key=str(d["id"]))
        self.query_one("#head", Static).update(
            f"page {self.page} of {self.pages} · {len(doc['data'])} of {self.total} devices")
