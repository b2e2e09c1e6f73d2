"""Policy: the project's edge policy, one field a row; Enter changes the selected field
(``PATCH …/edge/policy``), and the API's validation message shows when it refuses. ``/``
keeps the fields whose name or description contains the text (the policy is one object,
so the console filters it itself)."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Any

import orjson
from rich.text import Text
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import DataTable, Static

from edgesync.tui._confirm import AskScreen
from edgesync.tui._format import cell
from edgesync.tui._screens import ScreenKind, screen
from edgesync.tui._search import SearchScreen
from edgesync.tui._table import Table

__all__ = ["PolicyScreen", "policy_value"]

_ABOUT = {
    "allow_additive_continue": "auto-approve a schema that only adds nullable columns",
    "max_pending_rows_per_lineage": "staged rows before backpressure pauses the device",
    "max_pending_bytes_per_lineage": "staged bytes before backpressure",
    "resume_threshold_percent": "resume below this share of both caps (1-99)",
    "materialization_breaker_threshold": "permanent materialization errors before the "
                                         "circuit breaker pauses the lineage",
    "schema_coalescing_mode": "none, project or fleet: who decides a new schema",
    "allow_auto_create_device_data_points": "allow the column action auto_create_and_map",
    "verify_interval_seconds": "verify each approved state lineage this often (0: never)",
}


def policy_value(text: str) -> Any:
    """What the operator typed, as ``edgesync policy set`` reads it: JSON (true, 50000,
    "fleet") or a bare word; ``default`` (or ``null``) puts the field back to its default."""
    text = text.strip()
    if text in ("default", "null", ""):
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _matches(name: str, text: str) -> bool:
    return not text or text.lower() in f"{name} {_ABOUT.get(name, '')}".lower()


@screen(ScreenKind.POLICY)
class PolicyScreen(SearchScreen):
    TITLE = "Policy"
    SEARCH_HINT = "keep the fields whose name or description contains this; Enter applies"
    BINDINGS = [
        Binding("enter", "edit", "change…", show=False),
        Binding("e", "edit", "change…"),
        Binding("t", "flip", "toggle true/false"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.policy: dict[str, Any] = {}

    def body(self) -> Iterable[Widget]:
        yield self.search_box()
        yield Static("", id="head", classes="head", markup=False)
        table = Table(id="main-table", cursor_type="row")
        table.add_columns("field", "value", "what it does")
        yield table

    async def reload(self) -> None:
        policy = await self.call(self.api.policy)
        if policy is not None:
            self._show(policy)

    def _show(self, policy: dict[str, Any]) -> None:
        self.policy = policy
        table = self.query_one("#main-table", DataTable)
        row = table.cursor_row
        table.clear()
        names = [n for n in sorted(policy) if _matches(n, self.query_text)]
        for name in names:
            table.add_row(cell(name), Text(str(cell(policy[name])), style="bold"),
                          cell(_ABOUT.get(name, ""), 80), key=name)
        if names:
            table.move_cursor(row=min(row, len(names) - 1))
        head = ("The project's edge policy (docs/api.md); e or Enter changes the selected "
                "field, 'default' resets it.")
        if self.query_text:
            head += f" · {len(names)} of {len(policy)} fields · search: {self.query_text!r}"
        self.query_one("#head", Static).update(head)

    @property
    def selected(self) -> str | None:
        table = self.query_one("#main-table", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return None if key is None else str(key)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_edit()

    def action_edit(self) -> None:
        name = self.selected
        if name is None:
            return

        def answered(text: str | None) -> None:
            if text is not None:
                self.spawn(partial(self._set, name, policy_value(text)))

        current = orjson.dumps(self.policy.get(name)).decode()
        self.app.push_screen(AskScreen(f"New value for {name} (JSON or a word; 'default' "
                                       "puts it back to its default):", current), answered)

    def action_flip(self) -> None:
        name = self.selected
        if name is not None and isinstance(self.policy.get(name), bool):
            value = not self.policy[name]
            self.spawn(partial(self._set, name, value))
        else:
            self.say("t toggles true/false fields only; e changes the others", error=True)

    async def _set(self, name: str, value: Any) -> None:
        policy = await self.call(self.api.set_policy, {name: value})
        if policy is not None:
            self._show(policy)
            self.say(f"{name} = {orjson.dumps(policy[name]).decode()}")
