"""The console's Devices screen (``6``) against a real ``edgesync serve``: each device's
presence and what its batches cost on the wire, one device sending plain JSON and one
sending zstd frames of the same batches (docs/protocol.md "Compressed batches")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable
from tui_console import make_console
from tui_pilot import on, rows, until

from edgesync import _core, fleet
from edgesync.server import Server
from edgesync.tui._devices import DevicesScreen, traffic_words
from edgesync.tui._lineages import LineagesScreen

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def test_traffic_words() -> None:
    assert traffic_words({}) == ("-", "-", "-")
    assert traffic_words({"batch_bytes_received": 2048, "batch_bytes_json": 2048,
                          "compression_ratio": 1.0}) == ("2.0 KiB", "2.0 KiB", "plain")
    assert traffic_words({"batch_bytes_received": 512, "batch_bytes_json": 5 << 20,
                          "compression_ratio": 0.0001}) == ("512 B", "5.0 MiB", "0.0 %")


async def test_devices_screen_shows_bytes_on_the_wire(
        tui_server: Server, tmp_path: Path, mqtt_url: str,
        batches: Callable[..., Any]) -> None:
    console = await make_console(tui_server, tmp_path, mqtt_url, "dev")
    dev, pool = console.device, console.pool
    async with pool.acquire() as conn:
        project = await conn.fetchval("SELECT name FROM edge_projects WHERE id = $1",
                                      dev.scope.project_id)
        zipped = await fleet.add_device(conn, project=project, name=f"{dev.scope.device_name}-z",
                                        topic_slug=dev.scope.topic_slug, fleet="north")
    f = batches("device_state")
    payload = f.payload(f.rows(*[("insert", {"id": i, "mode": "heat", "setpoint": i / 2})
                                 for i in range(200)]))
    pipeline = tui_server.pipeline
    assert pipeline is not None
    await pipeline.handle(f"{zipped.root_topic}/sync/rows/batch",
                          _core.compress_blob(payload, 3))
    await pipeline.presence.flush(pool)

    tui = console.app()
    async with tui.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: on(pilot, LineagesScreen), "lineages")
        await pilot.press("6")
        screen = await until(pilot, lambda: on(pilot, DevicesScreen), "devices")
        table = screen.query_one("#main-table", DataTable)
        await until(pilot, lambda: len(rows(table)) == 2, "both devices listed", refresh=True)
        shown = {cells[0]: cells for cells in rows(table).values()}
        z = shown[zipped.device_name]
        assert z[1] == "north" and z[5].endswith("B") and z[7].endswith("%"), z
        assert float(z[7].rstrip(" %")) < 30
        assert shown[dev.scope.device_name][5:] == ["-", "-", "-"]
