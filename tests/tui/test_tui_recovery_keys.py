"""Decisions revisited from a lineage detail, against a real ``edgesync serve`` (batches
through its ingest pipeline): ``R`` replays the rows of a rejected schema version under
the approved one after showing which fit; ``o`` changes the sync authority, asking again
(force) while a write-back is not acknowledged by the device."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kits.review_helpers import approve
from textual.widgets import DataTable
from tui_console import make_console
from tui_pilot import composed, on, open_row, rows, screen_text, status, until

from edgesync.client import ApiClient
from edgesync.materialize import quote_ident
from edgesync.server import Server
from edgesync.tui._confirm import ConfirmScreen
from edgesync.tui._help import HelpScreen
from edgesync.tui._lineage_detail import LineageDetailScreen
from edgesync.tui._lineages import LineagesScreen

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

V1 = [("id", "INTEGER", 1, True), ("mode", "TEXT", 0, True), ("setpoint", "REAL", 0, False)]


async def test_replay_rejected_and_sync_authority_keys(
        tui_server: Server, tmp_path: Path, mqtt_url: str,
        batches: Callable[..., Any]) -> None:
    console = await make_console(tui_server, tmp_path, mqtt_url, "rk")
    dev, pool = console.device, console.pool
    s = console.settings
    assert s.token and s.org_id and s.project and tui_server.pipeline is not None
    api = ApiClient(s.api_url, token=s.token, org_id=s.org_id).project(s.project)
    topic = f"{dev.root}/sync/rows/batch"
    f = batches("device_state")
    out = await tui_server.pipeline.handle(topic, f.payload(f.rows(
        ("insert", {"id": 1, "mode": "heat", "setpoint": 20.5}),
        ("insert", {"id": 2, "mode": "cool", "setpoint": None}))))
    lineage_id = out.lineage_id
    review = await pool.fetchval("SELECT id FROM edge_schema_reviews WHERE lineage_id = $1",
                                 lineage_id)
    await asyncio.to_thread(api.reject, str(review), 1, "not yet")
    f.set_columns([*V1, ("fan", "INTEGER", 0, False)])
    await tui_server.pipeline.handle(topic, f.payload(f.rows(
        ("insert", {"id": 3, "mode": "fan", "setpoint": 19.0, "fan": 2}))))
    await approve(pool, lineage_id)

    tui = console.app()
    async with tui.run_test(size=(150, 45)) as pilot:
        lineages = await until(pilot, lambda: on(pilot, LineagesScreen), "lineages")
        table = lineages.query_one("#main-table", DataTable)
        await until(pilot, lambda: len(rows(table)) == 1, "the lineage", refresh=True)
        await open_row(pilot, table, str(lineage_id))
        detail = await until(pilot, lambda: on(pilot, LineageDetailScreen), "detail")
        await until(pilot, lambda: detail.lineage is not None
                    and detail.check_action("replay_rejected", ()), "a rejected version")
        await pilot.press("question_mark")
        help_ = await until(pilot, lambda: composed(pilot, HelpScreen), "help")
        assert "R       replay rejected versions' rows…" in help_.plain
        assert "o       sync authority…" in help_.plain and "r       refresh" in help_.plain
        await pilot.press("escape")
        await until(pilot, lambda: on(pilot, LineageDetailScreen), "help closed")

        # R: which rejected versions fit, then their rows replay
        await pilot.press("R")
        confirm = await until(pilot, lambda: on(pilot, ConfirmScreen), "replay question")
        question = str(confirm.query_one("#question").render())
        assert "2 rows in 1 batches: replayable" in question, question
        await pilot.press("y")
        await until(pilot, lambda: "rejected versions' rows replaying: 1 batches, 2 rows"
                    in status(detail), "replaying")
        target = quote_ident(detail.lineage["target_table"] if detail.lineage else "")
        await until(pilot, lambda: detail.lineage and detail.lineage["staged_rows"] == 0,
                    "staged rows replayed", refresh=True)
        assert sorted(r["id"] for r in await pool.fetch(f"SELECT id FROM {target}")) == [1, 2, 3]

        # o: cloud-authoritative, then back while a write-back is pending (force asked)
        await pilot.press("o")
        confirm = await until(pilot, lambda: on(pilot, ConfirmScreen), "authority question")
        assert "Make device_state cloud_authoritative?" in str(
            confirm.query_one("#question").render())
        await pilot.press("y")
        await until(pilot, lambda: "sync authority: cloud_authoritative" in status(detail),
                    "cloud-authoritative")
        await until(pilot, lambda: "sync authority: cloud_authoritative" in screen_text(detail),
                    "the summary follows")
        await asyncio.to_thread(api.write_state_rows, str(dev.id), str(lineage_id),
                                [{"pk": {"id": 1}, "values": {"mode": "eco"}}])
        await pilot.press("o")
        await until(pilot, lambda: on(pilot, ConfirmScreen), "authority question")
        await pilot.press("y")
        confirm = await until(pilot, lambda: (c := on(pilot, ConfirmScreen)) is not None
                              and "Switch anyway?" in str(c.query_one("#question").render())
                              and c, "asked to force")
        assert "not yet acknowledged" in str(confirm.query_one("#question").render())
        await pilot.press("y")
        await until(pilot, lambda: "sync authority: device_authoritative (was "
                    "cloud_authoritative; 1 cloud row versions forgotten)" in status(detail),
                    "back to device-authoritative")
    api.client.close()
