"""Staged and written rows of one lineage in one table: staged operations waiting in
staging, or what the cloud wrote (the state mirror, or the telemetry table)."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Any

import orjson
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import DataTable, Static

from edgesync._vocabulary import ColumnActionKind, Pipeline, SyncAuthority
from edgesync.client import ApiClientError
from edgesync.errors import ApiErrorCode
from edgesync.tui._confirm import AskScreen
from edgesync.tui._format import cell
from edgesync.tui._paged import PAGE_SIZE, PagedScreen
from edgesync.tui._screens import ScreenKind, screen
from edgesync.tui._table import Table

__all__ = ["RowsScreen", "decoded_rows", "source_columns", "writeback_row"]

# Why a written view can be empty: nothing approved (or provisioned) yet.
_NOT_YET = frozenset({ApiErrorCode.MIRROR_NOT_PROVISIONED, ApiErrorCode.TELEMETRY_NOT_PROVISIONED})


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


def source_columns(lineage: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """(primary-key source columns, source column → mirror column) of the approved schema:
    write-back names source columns, the mirror shows them under their mirror names."""
    approved = lineage.get("approved_schema_hash")
    version = next((v for v in lineage.get("schema_versions") or []
                    if v["schema_hash"] == approved), None)
    columns = ((version or {}).get("schema_columns") or {}).get("columns") or []
    pk = [str(c["name"]) for c in sorted(columns, key=lambda c: c.get("pk_ordinal") or 0)
          if c.get("pk_ordinal")]
    mirrored = {str(b["source_column_name"]): str(b["mirror_column_name"]
                                                  or b["source_column_name"])
                for b in lineage.get("bindings") or []
                if b["schema_hash"] == approved and b["action"] == ColumnActionKind.MIRROR}
    return pk, mirrored


def writeback_row(lineage: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """A mirror row as a write-back row: ``{"pk": {...}, "values": {...}}`` in source
    column names."""
    pk, mirrored = source_columns(lineage)
    return {"pk": {c: row.get(mirrored.get(c, c)) for c in pk},
            "values": {c: row.get(m) for c, m in mirrored.items() if c not in pk}}


@screen(ScreenKind.ROWS)
class RowsScreen(PagedScreen):
    TITLE = "Rows"
    BINDINGS = [
        Binding("s", "mode('staged')", "staged"),
        Binding("w", "mode('written')", "written"),
        *PagedScreen.PAGE_BINDINGS,
        Binding("e", "write(False)", "edit row…"),
        Binding("plus", "write(True)", "add row…"),
    ]

    def __init__(self, lineage: dict[str, Any], mode: str) -> None:
        super().__init__()
        self.lineage = lineage
        self.mode = mode
        self.shown: list[dict[str, Any]] = []

    def body(self) -> Iterable[Widget]:
        yield Static("", id="head", classes="head", markup=False)
        table = Table(id="main-table", cursor_type="row", zebra_stripes=True)
        yield table

    @property
    def source(self) -> str:
        """What the table shows, in the header's words."""
        target = self.lineage.get("target_table") or "not provisioned"
        if self.mode == "staged":
            return "staged rows (edge_staged_rows)"
        if self.lineage["pipeline"] == Pipeline.TELEMETRY:
            return f"written: telemetry {target}"
        return f"written: state mirror {target}"

    def _fetch(self) -> dict[str, Any]:
        lid = self.lineage["id"]
        paging = {"page": self.page, "limit": PAGE_SIZE}
        if self.mode == "staged":
            return self.api.get_page(f"/edge/lineages/{lid}/staged-rows", **paging)
        if self.lineage["pipeline"] == Pipeline.TELEMETRY:
            return self.api.telemetry(lid, **paging)
        return self.api.get_page(f"/edge/lineages/{lid}/mirror-rows", **paging)

    async def reload(self) -> None:
        table = self.query_one("#main-table", DataTable)
        try:
            doc = await self.call(self._fetch, raise_codes=_NOT_YET)
        except ApiClientError as exc:
            table.clear(columns=True)
            self.shown = []
            self.total = 0
            self._head("nothing written yet")
            self.say(f"{exc.code}: {exc.message}", error=True)
            return
        if doc is None:
            return
        self.total = int(doc["meta"]["total"])
        columns, rows = decoded_rows(doc["data"]) if self.mode == "staged" else (
            list(dict.fromkeys(k for r in doc["data"] for k in r)), doc["data"])
        self.shown = rows
        table.clear(columns=True)
        table.add_columns(*columns)
        for r in rows:
            table.add_row(*(cell(r.get(c), 40) for c in columns))
        self._head(f"{self.total} rows")
        self.say(f"{len(rows)} rows on this page")

    def _head(self, count: str) -> None:
        name = f"{self.lineage['device_name']} / {self.lineage['source_table']}"
        self.query_one("#head", Static).update(
            f"{name} · source: {self.source} · page {self.page} of {self.pages} · {count}")

    # ------------------------------------------------------------------ write-back

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "write":  # only a cloud-authoritative state table takes rows back
            return (self.mode == "written" and self.lineage["pipeline"] == Pipeline.ROWS
                    and self.lineage.get("sync_authority")
                    == SyncAuthority.CLOUD)
        return True

    def action_mode(self, mode: str) -> None:
        if mode != self.mode:
            self.mode = mode
            self.page = 1
            self.refresh_bindings()
            self.action_refresh()

    def action_write(self, add: bool) -> None:
        if not self.check_action("write", ()):
            self.say("write-back needs the written view of a cloud_authoritative state table",
                     error=True)
            return
        table = self.query_one("#main-table", DataTable)
        current = self.shown[table.cursor_row] if self.shown and table.row_count else {}
        template = writeback_row(self.lineage, current)
        if add:
            template = {"pk": dict.fromkeys(template["pk"]), "values": template["values"]}
            question = ('A new row, as {"pk": {...}, "values": {...}} (source column names); '
                        "Enter sends it to the device:")
            text_ = orjson.dumps(template).decode()
        else:
            if not current:
                self.say("no row selected", error=True)
                return
            question = (f"Values for the row {orjson.dumps(template['pk']).decode()} "
                        "(JSON, source column names); Enter sends them to the device:")
            text_ = orjson.dumps(template["values"]).decode()

        def answered(answer: str | None) -> None:
            if answer is None:
                return
            try:
                doc = orjson.loads(answer)
            except orjson.JSONDecodeError as exc:
                self.say(f"not JSON: {exc}", error=True)
                return
            row = doc if add else {"pk": template["pk"], "values": doc}
            self.spawn(partial(self._write, row))

        self.app.push_screen(AskScreen(question, text_), answered)

    async def _write(self, row: Any) -> None:
        result = await self.call(self.api.write_state_rows, str(self.lineage["device_id"]),
                                 str(self.lineage["id"]), [row])
        if result is not None:
            await self.reload()
            self.say(f"{result['rows_written']} row written (cloud_version "
                     f"{result['cloud_version']}); state_write queued for the device")
