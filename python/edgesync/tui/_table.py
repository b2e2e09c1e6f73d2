"""The console's table: Textual's ``DataTable`` whose cells are drawn again when a column
grows to fit new rows.

Why a subclass: ``DataTable`` measures new rows only when it is next idle, but a frame
may be drawn before that (a busy machine, the screen redrawn first). That frame caches
each cell cut to the column's old width (the header's), and the cache is keyed by an
update counter that the later measuring does not advance, so the cut cells stayed on
screen ("dev-te" for "dev-term-…") until the next refresh of the table. Here a change of
any column's width after measuring throws those cached cells away."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import CellKey, RowKey

__all__ = ["Table"]


class Table(DataTable[Text]):
    def _widths(self) -> list[int]:
        return [self._label_column.content_width,
                *(column.content_width for column in self.columns.values())]

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        before = self._widths()
        super()._update_dimensions(new_rows)
        self._redraw_if_grown(before)

    def _update_column_widths(self, updated_cells: set[CellKey]) -> None:
        before = self._widths()
        super()._update_column_widths(updated_cells)
        self._redraw_if_grown(before)

    def _redraw_if_grown(self, before: list[int]) -> None:
        if self._widths() != before:
            self._clear_caches()
            self._update_count += 1
            self.refresh()
