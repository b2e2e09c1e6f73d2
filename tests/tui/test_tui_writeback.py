"""Write-back from the console: a state table approved as cloud_authoritative (o on the
approve form); in its written view e edits the selected row and + adds one; the real
agent applies the state_write controls to the device's SQLite."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from kits.e2e_kit import app, eventually, running_agent, sqlite_table, wait_reviews
from textual.widgets import DataTable, Input
from tui_console import make_console
from tui_pilot import column_names, on, open_row, rows, until

from edgesync.server import Server
from edgesync.tui._approve import ApproveScreen
from edgesync.tui._confirm import AskScreen
from edgesync.tui._review_detail import ReviewDetailScreen
from edgesync.tui._reviews import ReviewsScreen
from edgesync.tui._rows import RowsScreen

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]
COLS = ["id", "mode", "setpoint"]


async def test_edit_and_add_rows_reach_sqlite(tui_server: Server, tmp_path: Path,
                                              mqtt_url: str) -> None:
    console = await make_console(tui_server, tmp_path, mqtt_url, "wb")
    dev = console.device
    app(dev.db, "CREATE TABLE device_state (id INTEGER PRIMARY KEY, mode TEXT, setpoint REAL)")
    async with running_agent(dev):
        app(dev.db, ("INSERT INTO device_state VALUES (?, ?, ?)",
                     [(i, f"m{i}", i * 0.5) for i in range(1, 6)]))
        queued = await wait_reviews(console.pool, dev, {"device_state"})
        review_id = str(queued["device_state"].id)
        tui = console.app()
        async with tui.run_test(size=(140, 45)) as pilot:
            await pilot.press("2")
            reviews = await until(pilot, lambda: on(pilot, ReviewsScreen), "reviews")
            table = reviews.query_one("#main-table", DataTable)
            await until(pilot, lambda: review_id in rows(table), "the review")
            await open_row(pilot, table, review_id)
            detail = await until(pilot, lambda: on(pilot, ReviewDetailScreen), "detail")
            await until(pilot, lambda: detail.review is not None, "loaded")
            await pilot.press("a")
            form = await until(pilot, lambda: on(pilot, ApproveScreen), "approve form")
            await pilot.press("o")
            await until(pilot, lambda: "sync authority: cloud_authoritative" in str(
                form.query_one("#preview").render()), "authority shown")
            await pilot.press("a")
            await until(pilot, lambda: detail.review and detail.review["status"] == "approved",
                        "approved")

            await pilot.press("d")
            viewer = await until(pilot, lambda: on(pilot, RowsScreen), "staged view")
            assert viewer.check_action("write", ()) is False  # only the written view
            await pilot.press("w")
            vtable = viewer.query_one("#main-table", DataTable)

            def by_id() -> dict[str, str]:
                if "id" not in column_names(vtable):
                    return {}
                ix = column_names(vtable).index("id")
                return {c[ix]: k for k, c in rows(vtable).items()}

            await until(pilot, lambda: len(by_id()) == 5, "five mirror rows", refresh=True)
            assert viewer.check_action("write", ()) is True

            # e: new values for row 2
            await open_row(pilot, vtable, by_id()["2"], enter=False)
            await pilot.press("e")
            ask = await until(pilot, lambda: on(pilot, AskScreen), "values prompt")
            box = ask.query_one(Input)
            assert orjson.loads(box.value) == {"mode": "m2", "setpoint": 1.0}
            box.value = '{"mode": "eco", "setpoint": 19.5}'
            await pilot.press("enter")
            await until(pilot, lambda: "1 row written (cloud_version 1)" in viewer.status_text,
                        "written")
            await eventually(lambda: _sqlite_has(dev.db, (2, "eco", 19.5)),
                             what="the edit in the device's SQLite")

            # +: a new row
            await pilot.press("plus")
            ask = await until(pilot, lambda: on(pilot, AskScreen), "new row prompt")
            ask.query_one(Input).value = '{"pk": {"id": 42}, "values": {"mode": "new", ' \
                                         '"setpoint": 1.0}}'
            await pilot.press("enter")
            await until(pilot, lambda: "cloud_version 2" in viewer.status_text, "added")
            await eventually(lambda: _sqlite_has(dev.db, (42, "new", 1.0)),
                             what="the new row in the device's SQLite")
            await until(pilot, lambda: "42" in by_id(), "new row in the written view",
                        refresh=True)


async def _sqlite_has(db: Path, row: tuple[object, ...]) -> bool:
    return row in sqlite_table(db, "device_state", COLS)
