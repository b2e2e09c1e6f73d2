"""Approve with column actions chosen per column: mirror (under another name, as another
type), map to a data point, auto-create-and-map, ignore or defer; the target table it
gives is previewed below as the actions change.

The form starts from the review's ``suggested_column_actions`` (the last approval's
decisions carried forward) and says per column whether its action is carried, new or
needs a decision. The preview's refusals are shown on their columns with their fixes, and
``a`` (approve) is off while any is open or the preview has not answered: the approval
runs the same check."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from edgesync._vocabulary import ColumnActionKind
from edgesync.client import ApiClientError, ProjectApi
from edgesync.client._actions import resolve_map_specs, suggested_by_column
from edgesync.errors import ConfigError
from edgesync.tui._confirm import AskScreen
from edgesync.tui._format import cell
from edgesync.tui._screens import ScreenKind, screen
from edgesync.tui._table import Table

if TYPE_CHECKING:
    from edgesync.tui._app import EdgesyncTui

__all__ = ["TARGET_TYPES", "Approval", "ApproveScreen", "preview_lines"]

TARGET_TYPES: list[str | None] = [None, "bigint", "double precision", "numeric", "text",
                                  "bytea", "boolean", "jsonb"]


@dataclass
class Approval:
    column_actions: list[dict[str, Any]]
    sync_authority: str | None = None


_SUGGESTION_WORDS = {"carried": "carried", "new": "new", "needs_decision": "needs decision"}
def refusal_lines(refusals: list[dict[str, Any]]) -> list[str]:
    return [f"refused: {r['source_column_name'] or 'column_actions'}: "
            f"{r['code'].replace('_', ' ')}: {r['detail']}\n  fix: {r['fix']}"
            for r in refusals]


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
    retired = p.get("retired_columns") or []
    if retired:
        lines.append("no longer written (kept with their last values): " + ", ".join(
            f"{c['name']} {c['pg_type']} (from {c['source_column_name']})" for c in retired))
    return lines


@screen(ScreenKind.APPROVE)
class ApproveScreen(Screen[Approval | None]):
    TITLE = "Approve: column actions"
    # The columns take ↑/↓ as the form opens (the scrolling container, first in the Tab
    # order, took them before: an operator had to press Tab first).
    AUTO_FOCUS = "#actions"
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
        suggested = suggested_by_column(review.get("suggested_column_actions"))
        self.suggestions: dict[str, dict[str, Any]] = {
            str(s["source_column_name"]): s for s in review.get("suggested_column_actions")
            or []}
        self.actions: dict[str, dict[str, Any]] = {
            str(c["name"]): suggested.get(str(c["name"]))
            or {"source_column_name": str(c["name"]), "action": "mirror"}
            for c in self.columns}
        self.sync_authority: str | None = None
        # The preview's refusals by column; None until the preview of the current actions
        # has answered (approve stays off meanwhile).
        self.refusals: dict[str, list[dict[str, Any]]] | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll():
            yield Static(Text(f"{self.review['source_table']}: choose an action per column "
                              "(↑/↓ picks the column), then a approves. Suggested: the last "
                              "approval's decisions (carried), new columns, and what needs "
                              "a decision."), classes="block")
            table = Table(id="actions", cursor_type="row")
            table.add_columns("column", "affinity", "pk", "action", "target name",
                              "target type", "data point", "suggested", "refused")
            yield table
            yield Static("Preview", classes="section")
            yield Static("", id="preview", classes="block", markup=False)
        yield Static("", id="status", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self._changed()

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
            name = str(c["name"])
            a = self.actions[name]
            s = self.suggestions.get(name)
            refused = (self.refusals or {}).get(name) or []
            table.add_row(cell(name), cell(c.get("decl_type_affinity")),
                          cell("yes" if c.get("pk_ordinal") else "no"),
                          Text(a["action"], style="bold"),
                          cell(a.get("mirror_column_name")), cell(a.get("target_type")),
                          cell(a.get("device_data_point_id") or a.get("data_point_name")),
                          Text(_SUGGESTION_WORDS.get(s["suggestion"], s["suggestion"])
                               if s else "-",
                               style="yellow" if s and s["suggestion"] == "needs_decision"
                               else ""),
                          Text(", ".join(r["code"].replace("_", " ") for r in refused) or "-",
                               style="bold red" if refused else ""),
                          key=name)
        if self.columns:
            table.move_cursor(row=min(row, len(self.columns) - 1))

    def _changed(self) -> None:
        """The actions changed: draw them, and ask the API's preview again."""
        self.refusals = None
        self.refresh_bindings()
        self._render_table()
        # The API checks the actions as an approval would and names the target.
        self.run_worker(cast(Any, self._ask_preview), group="preview", exclusive=True)

    def _show_preview(self, lines: list[str], *, error: str | None = None,
                      refused: Sequence[str] = ()) -> None:
        out = Text("\n".join(lines))
        if error:
            out.append(("\n" if lines else "") + f"refused: {error}", style="bold red")
        for line in refused:
            out.append("\n" + line, style="bold red")
        if not error and not refused:
            out.append("\nthe approval would pass (a approves)", style="green")
        if not self.registry:
            authority = self.sync_authority or "unchanged (device_authoritative by default)"
            out.append(f"\nsync authority: {authority}  (o toggles)")
        self.query_one("#preview", Static).update(out)

    @property
    def _project_api(self) -> ProjectApi:
        return cast("EdgesyncTui", self.app).api

    async def _ask_preview(self) -> None:
        actions = [self.actions[str(c["name"])] for c in self.columns]
        api = self._project_api
        ask = api.preview_registry_approval if self.registry else api.preview_approval
        try:
            doc = await asyncio.to_thread(ask, self.review["id"], actions)
        except ApiClientError as exc:
            self._show_preview([], error=str(exc))
            return
        refusals = doc.get("refusals") or []
        self.refusals = {}
        for r in refusals:
            self.refusals.setdefault(str(r["source_column_name"]), []).append(r)
        self._show_preview(preview_lines(doc), refused=refusal_lines(refusals))
        self._render_table()
        self.refresh_bindings()

    def say(self, message: str, *, error: bool = False) -> None:
        self.query_one("#status", Static).update(
            Text(message, style="bold red" if error else "green"))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "send":
            # Off until the preview of these actions answered with no refusal.
            return self.refusals is not None and not any(self.refusals.values())
        refused = action == "toggle_authority" or parameters == ("defer",)
        return not (self.registry and refused)

    def action_set(self, action: str) -> None:
        a = self.current
        if a is None:
            return
        name = a["source_column_name"]
        self.actions[name] = {"source_column_name": name, "action": action}
        self._changed()

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
            if a["action"] == ColumnActionKind.AUTO_CREATE_AND_MAP:
                renamed_ = {"source_column_name": name, "action": "auto_create_and_map",
                            "data_point_name": value.strip() or None}
            else:
                renamed_ = {"source_column_name": name, "action": "mirror",
                            "mirror_column_name": value.strip() or None,
                            "target_type": a.get("target_type")}
            self.actions[name] = {k: v for k, v in renamed_.items() if v is not None}
            self._changed()

        self.app.push_screen(AskScreen(f"New name for {a['source_column_name']} (empty: its "
                                       "own name):", a.get("mirror_column_name")
                                       or a.get("data_point_name") or ""), renamed)

    def action_cycle_type(self) -> None:
        a = self.current
        if a is None:
            return
        if a["action"] != ColumnActionKind.MIRROR:
            a = {"source_column_name": a["source_column_name"], "action": "mirror"}
        nxt = TARGET_TYPES[(TARGET_TYPES.index(a.get("target_type")) + 1) % len(TARGET_TYPES)]
        a = {k: v for k, v in a.items() if k != "target_type"}
        if nxt is not None:
            a["target_type"] = nxt
        self.actions[a["source_column_name"]] = a
        self._changed()

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
        try:
            (spec,) = await asyncio.to_thread(resolve_map_specs, self._project_api,
                                              [f"{column}={ref}"])
        except ConfigError as exc:
            self.say(exc.reason, error=True)
            return
        self.actions[column] = {"source_column_name": column, "action": "map",
                                "device_data_point_id": spec.partition("=")[2]}
        self._changed()

    def action_toggle_authority(self) -> None:
        self.sync_authority = {None: "cloud_authoritative",
                               "cloud_authoritative": "device_authoritative",
                               "device_authoritative": None}[self.sync_authority]
        self._changed()

    def action_send(self) -> None:
        self.dismiss(Approval([self.actions[str(c["name"])] for c in self.columns],
                              self.sync_authority))

    def action_cancel(self) -> None:
        self.dismiss(None)
