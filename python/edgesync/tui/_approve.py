"""Approve with column actions chosen per column: mirror (under another name, as another
type), map to a data point, auto-create-and-map, ignore or defer; the target table it
gives is previewed below as the actions change."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from edgesync.client import ApiClientError
from edgesync.client._actions import resolve_map_specs
from edgesync.errors import ConfigError
from edgesync.tui._confirm import AskScreen
from edgesync.tui._format import cell
from edgesync.tui._table import Table

__all__ = ["TARGET_TYPES", "Approval", "ApproveScreen", "preview_lines"]

TARGET_TYPES: list[str | None] = [None, "bigint", "double precision", "numeric", "text",
                                  "bytea", "boolean", "jsonb"]


@dataclass
class Approval:
    column_actions: list[dict[str, Any]]
    sync_authority: str | None = None


def preview_lines(p: dict[str, Any]) -> list[str]:
    """The API's preview (``POST …/schema-reviews/{id}/preview`` or
    ``…/registry-reviews/{id}/preview``) as lines for the form."""
    cols = [f"{c['target_column_name']} {c['pg_type']}"
            + (" primary key" if c["primary_key"] else "") for c in p["columns"]]
    lines = [f"target table: {p['target_table']} ({p['pipeline']})",
             f"target columns: {', '.join(cols) or '(none)'}"]
    if p["data_points"]:
        points = [f"{d['source_column_name']} → data point "
                  f"{d['device_data_point_id'] or d['data_point_name']}"
                  for d in p["data_points"]]
        lines.append(f"data points: {'; '.join(points)}")
    if p["ignored"]:
        lines.append(f"not synced: {', '.join(p['ignored'])}")
    if p["deferred"]:
        lines.append("deferred (the lineage stays paused until decided): "
                     f"{', '.join(p['deferred'])}")
    return lines


class ApproveScreen(Screen[Approval | None]):
    TITLE = "Approve: column actions"
    BINDINGS = [
        Binding("m", "set('mirror')", "mirror"),
        Binding("i", "set('ignore')", "ignore"),
        Binding("f", "set('defer')", "defer"),
        Binding("u", "set('auto_create_and_map')", "auto-map"),
        Binding("g", "map", "map to data point…"),
        Binding("e", "rename", "rename…"),
        Binding("t", "cycle_type", "type"),
        Binding("o", "toggle_authority", "authority"),
        Binding("a", "send", "approve"),
        Binding("escape", "cancel", "cancel"),
    ]

    def __init__(self, review: dict[str, Any], *, registry: bool = False) -> None:
        super().__init__()
        self.review = review
        # A registry decision binds every column for every device: no defer, and the sync
        # authority stays each lineage's own.
        self.registry = registry
        self.columns: list[dict[str, Any]] = (review.get("schema_columns") or {}).get(
            "columns") or []
        self.actions: dict[str, dict[str, Any]] = {
            str(c["name"]): {"source_column_name": str(c["name"]), "action": "mirror"}
            for c in self.columns}
        self.sync_authority: str | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll():
            yield Static(Text(f"{self.review['source_table']}: choose an action per column "
                              "(↑/↓ picks the column), then a approves."), classes="block")
            table = Table(id="actions", cursor_type="row")
            table.add_columns("column", "declared type", "pk", "action", "target name",
                              "target type", "data point")
            yield table
            yield Static("Preview", classes="section")
            yield Static("", id="preview", classes="block", markup=False)
        yield Static("", id="status", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self._render_table()

    @property
    def current(self) -> dict[str, Any] | None:
        table = self.query_one("#actions", DataTable)
        if not self.columns:
            return None
        return self.actions[str(self.columns[table.cursor_row]["name"])]

    def _render_table(self) -> None:
        table = self.query_one("#actions", DataTable)
        row = table.cursor_row
        table.clear()
        for c in self.columns:
            a = self.actions[str(c["name"])]
            table.add_row(cell(c["name"]), cell(c.get("decl_type")),
                          cell(c.get("pk_ordinal") or "-"), Text(a["action"], style="bold"),
                          cell(a.get("mirror_column_name")), cell(a.get("target_type")),
                          cell(a.get("device_data_point_id") or a.get("data_point_name")),
                          key=str(c["name"]))
        if self.columns:
            table.move_cursor(row=min(row, len(self.columns) - 1))
        # The API checks the actions as an approval would and names the target.
        self.run_worker(cast(Any, self._ask_preview), group="preview", exclusive=True)

    def _show_preview(self, lines: list[str], *, error: str | None = None) -> None:
        out = Text("\n".join(lines))
        if error:
            out.append(("\n" if lines else "") + f"refused: {error}", style="bold red")
        if not self.registry:
            authority = self.sync_authority or "unchanged (device_authoritative by default)"
            out.append(f"\nsync authority: {authority}  (o toggles)")
        self.query_one("#preview", Static).update(out)

    async def _ask_preview(self) -> None:
        from edgesync.tui._app import EdgesyncTui

        assert isinstance(self.app, EdgesyncTui)
        actions = [self.actions[str(c["name"])] for c in self.columns]
        api = self.app.api
        ask = api.preview_registry_approval if self.registry else api.preview_approval
        try:
            doc = await asyncio.to_thread(ask, self.review["id"], actions)
        except ApiClientError as exc:
            self._show_preview([], error=str(exc))
            return
        self._show_preview(preview_lines(doc))

    def say(self, message: str, *, error: bool = False) -> None:
        self.query_one("#status", Static).update(
            Text(message, style="bold red" if error else "green"))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        refused = action == "toggle_authority" or parameters == ("defer",)
        return not (self.registry and refused)

    def action_set(self, action: str) -> None:
        a = self.current
        if a is None:
            return
        name = a["source_column_name"]
        self.actions[name] = {"source_column_name": name, "action": action}
        self._render_table()

    def action_rename(self) -> None:
        a = self.current
        if a is None:
            return

        def renamed(value: str | None) -> None:
            if value is None:
                return
            # auto-create-and-map: the data point's name; anything else: a mirrored column
            # under this name (keeping a chosen target type).
            name = a["source_column_name"]
            if a["action"] == "auto_create_and_map":
                renamed_ = {"source_column_name": name, "action": "auto_create_and_map",
                            "data_point_name": value.strip() or None}
            else:
                renamed_ = {"source_column_name": name, "action": "mirror",
                            "mirror_column_name": value.strip() or None,
                            "target_type": a.get("target_type")}
            self.actions[name] = {k: v for k, v in renamed_.items() if v is not None}
            self._render_table()

        self.app.push_screen(AskScreen(f"New name for {a['source_column_name']} (empty: its "
                                       "own name):", a.get("mirror_column_name")
                                       or a.get("data_point_name") or ""), renamed)

    def action_cycle_type(self) -> None:
        a = self.current
        if a is None:
            return
        if a["action"] != "mirror":
            a = {"source_column_name": a["source_column_name"], "action": "mirror"}
        nxt = TARGET_TYPES[(TARGET_TYPES.index(a.get("target_type")) + 1) % len(TARGET_TYPES)]
        a = {k: v for k, v in a.items() if k != "target_type"}
        if nxt is not None:
            a["target_type"] = nxt
        self.actions[a["source_column_name"]] = a
        self._render_table()

    def action_map(self) -> None:
        a = self.current
        if a is None:
            return
        name = a["source_column_name"]

        def chosen(ref: str | None) -> None:
            if ref:
                self.run_worker(cast(Any, partial(self._map, name, ref.strip())), group="map")

        self.app.push_screen(AskScreen(f"Data point for {name} (its name or id):"), chosen)

    async def _map(self, column: str, ref: str) -> None:
        from edgesync.tui._app import EdgesyncTui

        assert isinstance(self.app, EdgesyncTui)
        try:
            (spec,) = await asyncio.to_thread(resolve_map_specs, self.app.api,
                                              [f"{column}={ref}"])
        except ConfigError as exc:
            self.say(exc.reason, error=True)
            return
        self.actions[column] = {"source_column_name": column, "action": "map",
                                "device_data_point_id": spec.partition("=")[2]}
        self._render_table()

    def action_toggle_authority(self) -> None:
        self.sync_authority = {None: "cloud_authoritative",
                               "cloud_authoritative": "device_authoritative",
                               "device_authoritative": None}[self.sync_authority]
        self._render_table()

    def action_send(self) -> None:
        self.dismiss(Approval([self.actions[str(c["name"])] for c in self.columns],
                              self.sync_authority))

    def action_cancel(self) -> None:
        self.dismiss(None)
