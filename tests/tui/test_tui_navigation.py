"""Getting around the console against a real ``edgesync serve`` and a real agent: the
Lineages screen filtered by device (``d``), a lineage detail's ``w`` and ``d`` views, the
rows viewer's pages (``n``/``p``) and ``s``/``w``, ``v`` jumping to its review, and ``/``
searching the schema reviews on the server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kits.e2e_kit import app, approve, running_agent, wait_equal
from textual.widgets import DataTable, Input
from tui_console import make_console
from tui_pilot import composed, on, open_row, rows, screen_text, status, until

from edgesync import fleet
from edgesync.server import Server
from edgesync.tui._confirm import AskScreen
from edgesync.tui._help import HelpScreen
from edgesync.tui._lineage_detail import LineageDetailScreen
from edgesync.tui._lineages import LineagesScreen
from edgesync.tui._review_detail import ReviewDetailScreen
from edgesync.tui._reviews import ReviewsScreen
from edgesync.tui._rows import RowsScreen

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


async def test_device_filter_pages_views_and_review_jump(
        tui_server: Server, tmp_path: Path, mqtt_url: str,
        batches: Callable[..., Any]) -> None:
    console = await make_console(tui_server, tmp_path, mqtt_url, "nav")
    dev, pool = console.device, console.pool
    # A second device of the project, its first batch waiting for review.
    async with pool.acquire() as conn:
        project = await conn.fetchval("SELECT name FROM edge_projects WHERE id = $1",
                                      dev.scope.project_id)
        other = await fleet.add_device(conn, project=project, name=f"{dev.scope.device_name}-b",
                                       topic_slug=dev.scope.topic_slug)
    f = batches("device_state")
    assert tui_server.pipeline is not None
    await tui_server.pipeline.handle(f"{other.root_topic}/sync/rows/batch", f.payload(
        f.rows(("insert", {"id": 1, "mode": "heat", "setpoint": 20.5}))))

    app(dev.db, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    async with running_agent(dev):
        app(dev.db, ("INSERT INTO t VALUES (?, ?)", [(i, f"v{i}") for i in range(1, 61)]))
        await approve(pool, dev, "t")
        await wait_equal(pool, dev, "t", ["id", "v"])

        tui = console.app()
        async with tui.run_test(size=(140, 45)) as pilot:
            lineages = await until(pilot, lambda: on(pilot, LineagesScreen), "lineages")
            table = lineages.query_one("#main-table", DataTable)
            await until(pilot, lambda: len(rows(table)) == 2, "two lineages", refresh=True)

            # D: one device's lineages; an unknown name says so (d means staged rows elsewhere)
            await pilot.press("D")
            await until(pilot, lambda: on(pilot, AskScreen), "device prompt")
            await pilot.press(*"nobody", "enter")
            await until(pilot, lambda: "no device named 'nobody'" in status(lineages),
                        "unknown device")
            await pilot.press("D")
            await until(pilot, lambda: on(pilot, AskScreen), "device prompt")
            await pilot.press(*other.device_name, "enter")
            await until(pilot, lambda: [c[1] for c in rows(table).values()] == ["device_state"]
                        and f"device: {other.device_name}" in screen_text(lineages),
                        "only the other device")
            await pilot.press("D")
            ask = await until(pilot, lambda: on(pilot, AskScreen), "device prompt")
            assert ask.query_one(Input).value == other.device_name
            ask.query_one(Input).value = ""
            await pilot.press("enter")
            await until(pilot, lambda: len(rows(table)) == 2, "every device again")
            await pilot.press("question_mark")
            help_ = await until(pilot, lambda: composed(pilot, HelpScreen), "help")
            assert "D       device…" in help_.plain and "F       fleet…" in help_.plain
            await pilot.press("escape")
            await until(pilot, lambda: on(pilot, LineagesScreen), "help closed")

            key = next(k for k, c in rows(table).items() if c[1] == "t")
            await open_row(pilot, table, key)
            detail = await until(pilot, lambda: on(pilot, LineageDetailScreen), "detail")
            await until(pilot, lambda: detail.lineage is not None, "detail loaded")

            # w: the written rows, 50 a page
            await pilot.press("w")
            viewer = await until(pilot, lambda: on(pilot, RowsScreen), "written rows")
            vtable = viewer.query_one("#main-table", DataTable)
            await until(pilot, lambda: "page 1 of 2 · 60 rows" in screen_text(viewer)
                        and len(rows(vtable)) == 50, "first page")
            assert "source: written: state mirror edge_state_" in screen_text(viewer)
            await pilot.press("n")
            await until(pilot, lambda: "page 2 of 2" in screen_text(viewer)
                        and len(rows(vtable)) == 10, "second page")
            await pilot.press("n")  # no page 3: stays
            await pilot.press("p")
            await until(pilot, lambda: "page 1 of 2" in screen_text(viewer)
                        and len(rows(vtable)) == 50, "back to the first page")
            await pilot.press("s")
            await until(pilot, lambda: "source: staged rows (edge_staged_rows)"
                        in screen_text(viewer) and "0 rows" in screen_text(viewer),
                        "staged: nothing left once approved")
            await pilot.press("escape")
            await until(pilot, lambda: on(pilot, LineageDetailScreen), "detail again")

            # d: the staged view straight from the detail
            await pilot.press("d")
            viewer = await until(pilot, lambda: on(pilot, RowsScreen)
                                 and pilot.app.screen is not viewer and pilot.app.screen,
                                 "staged rows")
            await until(pilot, lambda: "source: staged rows" in screen_text(viewer), "staged")
            await pilot.press("escape")

            # v: its review, approved
            await until(pilot, lambda: on(pilot, LineageDetailScreen), "detail again")
            await pilot.press("v")
            review = await until(pilot, lambda: on(pilot, ReviewDetailScreen), "its review")
            await until(pilot, lambda: review.review is not None
                        and review.review["status"] == "approved"
                        and review.review["source_table"] == "t", "the approved review")

            # /: the schema reviews searched on the server (device, table, …)
            await pilot.press("2")
            reviews = await until(pilot, lambda: on(pilot, ReviewsScreen), "reviews")
            rtable = reviews.query_one("#main-table", DataTable)
            await until(pilot, lambda: len(rows(rtable)) == 1, "the open review")
            await pilot.press("f")  # All: the approved one too
            await until(pilot, lambda: len(rows(rtable)) == 2, "two reviews")
            await pilot.press("slash")
            assert isinstance(tui.focused, Input)
            await pilot.press(*"DEVICE_ST", "enter")
            await until(pilot, lambda: [c[2] for c in rows(rtable).values()] == ["device_state"]
                        and "search: 'DEVICE_ST'" in screen_text(reviews), "search narrowed")
            await pilot.press("slash", *["backspace"] * 9, *other.device_name[-6:], "enter")
            await until(pilot, lambda: [c[2] for c in rows(rtable).values()] == ["device_state"]
                        and f"search: '{other.device_name[-6:]}'" in screen_text(reviews),
                        "search by device name")
            await pilot.press("slash", *["backspace"] * 6, "enter")
            await until(pilot, lambda: len(rows(rtable)) == 2, "search cleared")


async def test_a_backpressure_pause_says_so(tui_server: Server, tmp_path: Path, mqtt_url: str,
                                            batches: Callable[..., Any]) -> None:
    """More staged than the policy's cap: the lineage pauses for backpressure, and the
    Lineages screen and the detail say so in words."""
    console = await make_console(tui_server, tmp_path, mqtt_url, "bp",
                                 policy={"max_pending_rows_per_lineage": 3})
    f = batches("device_state")
    assert tui_server.pipeline is not None
    await tui_server.pipeline.handle(f"{console.device.root}/sync/rows/batch", f.payload(
        f.rows(*(("insert", {"id": i, "mode": "m", "setpoint": 1.0}) for i in range(1, 6)))))
    tui = console.app()
    async with tui.run_test(size=(140, 45)) as pilot:
        lineages = await until(pilot, lambda: on(pilot, LineagesScreen), "lineages")
        table = lineages.query_one("#main-table", DataTable)
        await until(pilot, lambda: [c[3:6] for c in rows(table).values()] == [
            ["paused", "backpressure", "5"]], "paused for backpressure", refresh=True)
        await open_row(pilot, table, next(iter(rows(table))))
        detail = await until(pilot, lambda: on(pilot, LineageDetailScreen), "detail")
        await until(pilot, lambda: "status: paused — backpressure" in screen_text(detail),
                    "the detail says why")
