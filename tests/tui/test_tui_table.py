"""The console's table shows whole cells after new rows, even when a frame was drawn
before the table measured them (CI once showed "dev-te" for a device name in a
120-column terminal: the cells drawn then, cut to the header's width, stayed cached)."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from edgesync.tui._table import Table

NAME = "dev-term-faf1da28"


class _OneTable(App[None]):
    def __init__(self, table: DataTable[Text]) -> None:
        super().__init__()
        self.table = table

    def compose(self) -> ComposeResult:
        self.table.add_columns("device", "table")
        yield self.table


async def _second_line(table: DataTable[Text]) -> str:
    app = _OneTable(table)
    async with app.run_test(size=(80, 10)) as pilot:
        await pilot.pause()
        table.clear()
        table.add_row(Text(NAME), Text("valves"), key="x")
        # A frame drawn before the table is idle and measures the new row (a busy
        # machine: the screen redrawn for the head line first)
        assert NAME not in table._render_line(1, 0, 80, table.rich_style).text
        await pilot.pause()
        await pilot.pause()
        # What the screen shows: the lines as the compositor asks for them
        return table.render_lines(table.region.reset_offset)[1].text


async def test_a_new_row_is_shown_whole() -> None:
    line = await _second_line(Table())
    assert NAME in line and "valves" in line, line


async def test_textual_datatable_alone_keeps_the_cut_cells() -> None:
    """Why ``Table`` exists: when this fails, Textual draws the measured cells again
    itself and ``edgesync.tui._table.Table`` can go."""
    line = await _second_line(DataTable())
    assert NAME not in line and " dev-te " in line, line
