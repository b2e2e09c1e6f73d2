"""Approving with data point actions in the console, against a real ``edgesync serve`` and
a real agent: ``g`` maps a column to an existing data point (named), ``u`` auto-creates
one (renamed with ``e``); the API's preview names both before the approval, and the
values the device sends reach the data points."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from kits.e2e_kit import app, eventually, running_agent, wait_reviews
from textual.widgets import DataTable, Input
from tui_console import make_console
from tui_pilot import on, open_row, rows, until

from edgesync.client import ApiClient
from edgesync.server import Server
from edgesync.tui._approve import ApproveScreen
from edgesync.tui._confirm import AskScreen
from edgesync.tui._review_detail import ReviewDetailScreen
from edgesync.tui._reviews import ReviewsScreen

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]


async def test_map_and_auto_create_data_points(tui_server: Server, tmp_path: Path,
                                               mqtt_url: str) -> None:
    console = await make_console(tui_server, tmp_path, mqtt_url, "dp",
                                 policy={"allow_auto_create_device_data_points": True})
    dev, pool = console.device, console.pool
    s = console.settings
    assert s.token and s.org_id and s.project
    api = ApiClient(s.api_url, token=s.token, org_id=s.org_id).project(s.project)
    point = await asyncio.to_thread(api.create_data_point, "room_temp", "real", "°C")
    app(dev.db, "CREATE TABLE m (id INTEGER PRIMARY KEY, temp REAL, hum REAL, note TEXT)")
    async with running_agent(dev):
        app(dev.db, ("INSERT INTO m VALUES (?, ?, ?, ?)",
                     [(i, 20 + i, 40 + i, f"n{i}") for i in range(1, 4)]))
        queued = await wait_reviews(pool, dev, {"m"})
        review_id = str(queued["m"].id)
        tui = console.app()
        async with tui.run_test(size=(150, 45)) as pilot:
            await pilot.press("2")
            reviews = await until(pilot, lambda: on(pilot, ReviewsScreen), "reviews")
            table = reviews.query_one("#main-table", DataTable)
            await until(pilot, lambda: review_id in rows(table), "the review")
            await open_row(pilot, table, review_id)
            detail = await until(pilot, lambda: on(pilot, ReviewDetailScreen), "detail")
            await until(pilot, lambda: detail.review is not None, "loaded")
            await pilot.press("a")
            form = await until(pilot, lambda: on(pilot, ApproveScreen), "approve form")
            atable = form.query_one("#actions", DataTable)

            def preview() -> str:
                return str(form.query_one("#preview").render())

            # g: an existing data point, by name; an unknown name is refused on the form
            await open_row(pilot, atable, "temp", enter=False)
            await pilot.press("g")
            await until(pilot, lambda: on(pilot, AskScreen), "data point prompt")
            await pilot.press(*"no_such_point", "enter")
            await until(pilot, lambda: "no_such_point" in str(
                form.query_one("#status").render()), "unknown data point refused")
            await pilot.press("g")
            await until(pilot, lambda: on(pilot, AskScreen), "data point prompt")
            await pilot.press(*"room_temp", "enter")
            await until(pilot, lambda: f"temp → data point {point['id']}" in preview(),
                        "the preview names the mapped data point")
            # u: auto-create-and-map, under another name (e)
            await open_row(pilot, atable, "hum", enter=False)
            await pilot.press("u")
            await pilot.press("e")
            ask = await until(pilot, lambda: on(pilot, AskScreen), "name prompt")
            ask.query_one(Input).value = ""
            await pilot.press(*"room_humidity", "enter")
            await until(pilot, lambda: "hum → data point room_humidity" in preview(),
                        "the preview names the data point to create")
            assert rows(atable)["hum"][3] == "auto_create_and_map"
            await pilot.press("a")
            await until(pilot, lambda: detail.review and detail.review["status"] == "approved",
                        "approved")

        bindings = {r["source_column_name"]: (r["action"], r["device_data_point_id"])
                    for r in await pool.fetch(
                        "SELECT source_column_name, action, device_data_point_id FROM "
                        "edge_column_bindings WHERE lineage_id = $1", queued["m"].lineage_id)}
        assert bindings["temp"] == ("map", uuid.UUID(point["id"]))
        assert bindings["hum"][0] == "auto_create_and_map" and bindings["hum"][1] is not None
        points = await asyncio.to_thread(api.data_points, limit=100)
        assert {"room_temp", "room_humidity"} <= {p["name"] for p in points["data"]}

        async def values_arrived() -> bool:
            doc = await asyncio.to_thread(api.data_point_values, point["id"], limit=100)
            return len(doc["data"]) == 3

        await eventually(values_arrived, what="the device's temp values in room_temp")
    api.client.close()
