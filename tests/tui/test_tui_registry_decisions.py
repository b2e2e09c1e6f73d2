"""Registry reviews rejected and abandoned from the console (against the real serve's
ingest pipeline and API): ``x`` rejects with the reason typed in; ``b`` abandons, and each
waiting device then has a review of its own."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kits.e2e_kit import pool_of
from textual.widgets import DataTable
from tui_pilot import on, open_row, rows, screen_text, until

from edgesync import fleet, identity
from edgesync.server import Server
from edgesync.tui import EdgesyncTui, TuiSettings
from edgesync.tui._confirm import AskScreen
from edgesync.tui._registry import RegistryReviewScreen, RegistryScreen

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


async def test_registry_review_rejected_and_abandoned(tui_server: Server,
                                                      batches: Callable[..., Any]) -> None:
    pool = pool_of(tui_server)
    tag = uuid.uuid4().hex[:8]
    name = slug = f"regd-{tag}"
    async with pool.acquire() as conn:
        boot = await identity.bootstrap(conn, org=f"org-regd-{tag}", project=name,
                                        topic_slug=slug)
        await conn.execute("UPDATE edge_projects SET policy = policy || $2::jsonb "
                           "WHERE id = $1", boot.project_id,
                           {"schema_coalescing_mode": "project"})
    assert tui_server.api is not None and tui_server.pipeline is not None
    devices = []
    for device_name in ("gw-a", "gw-b"):
        async with pool.acquire() as conn:
            device = await fleet.add_device(conn, project=name, name=device_name,
                                            topic_slug=slug)
        devices.append(device)
        for table in ("alpha", "beta"):
            f = batches(table)
            await tui_server.pipeline.handle(f"{device.root_topic}/sync/rows/batch", f.payload(
                f.rows(("insert", {"id": 1, "mode": "heat", "setpoint": 20.5}))))

    tui = EdgesyncTui(TuiSettings(tui_server.api.url, boot.token.token, str(boot.org_id),
                                  str(boot.project_id)))
    async with tui.run_test(size=(140, 45)) as pilot:
        await until(pilot, lambda: pilot.app.screen.title == "Lineages", "lineages")
        await pilot.press("5")
        screen = await until(pilot, lambda: on(pilot, RegistryScreen), "registry screen")
        table = screen.query_one("#main-table", DataTable)
        await until(pilot, lambda: len(rows(table)) == 2, "two registry reviews", refresh=True)

        def review_of(source_table: str) -> str:
            return next(k for k, c in rows(table).items() if c[2] == source_table)

        # x: reject alpha with a reason
        await open_row(pilot, table, review_of("alpha"))
        detail = await until(pilot, lambda: on(pilot, RegistryReviewScreen), "alpha review")
        await until(pilot, lambda: detail.review is not None
                    and len(detail.review.get("devices") or []) == 2, "two waiting devices")
        await pilot.press("x")
        await until(pilot, lambda: on(pilot, AskScreen), "reason prompt")
        await pilot.press(*"wrong table", "enter")
        await until(pilot, lambda: detail.review and detail.review["status"] == "rejected",
                    "alpha rejected")
        assert "reason: wrong table" in screen_text(detail)
        assert detail.check_action("abandon", ()) is False  # decided: b is off
        await pilot.press("escape")

        # b: abandon beta; each device gets its own review of it
        await until(pilot, lambda: on(pilot, RegistryScreen), "registry screen")
        await open_row(pilot, table, review_of("beta"))
        detail = await until(pilot, lambda: on(pilot, RegistryReviewScreen)
                             and pilot.app.screen is not detail and pilot.app.screen,
                             "beta review")
        await until(pilot, lambda: detail.review is not None, "loaded")
        await pilot.press("b")
        await until(pilot, lambda: on(pilot, AskScreen), "reason prompt")
        await pilot.press(*"per device", "enter")
        await until(pilot, lambda: detail.review and detail.review["status"] == "abandoned",
                    "beta abandoned")
        assert "each waiting device gets its own review" in detail.status_text
        await pilot.press("escape")
        # Decided, they leave the open reviews shown first; f: all of them
        await until(pilot, lambda: on(pilot, RegistryScreen) and not rows(table),
                    "none open")
        await pilot.press("f")
        await until(pilot, lambda: on(pilot, RegistryScreen)
                    and {c[2]: c[4] for c in rows(table).values()} == {
                        "alpha": "rejected", "beta": "abandoned"}, "both decided",
                    refresh=True)

    own = await pool.fetch(
        "SELECT l.device_id, r.status FROM edge_schema_reviews r JOIN edge_table_lineages l "
        "ON l.id = r.lineage_id WHERE l.project_id = $1 AND l.source_table = 'beta'",
        boot.project_id)
    assert sorted((r["device_id"], r["status"]) for r in own) == sorted(
        (d.device_id, "queued") for d in devices)
