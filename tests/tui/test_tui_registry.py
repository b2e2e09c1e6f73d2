"""Registry coalescing in the console: with the project's policy switched to coalescing
(on the Policy screen), two devices sending one new schema wait on one registry review;
the console shows the waiting devices, approves it with a rename (defer is not offered
at registry scope), lists the coalesced mirror both write, and consolidates."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kits.e2e_kit import pool_of
from textual.widgets import DataTable, Input
from tui_pilot import on, open_row, rows, screen_text, until

import edgesync.fleet
from edgesync import identity
from edgesync.server import Server
from edgesync.tui import EdgesyncTui, TuiSettings
from edgesync.tui._approve import ApproveScreen
from edgesync.tui._confirm import AskScreen
from edgesync.tui._lineage_detail import LineageDetailScreen
from edgesync.tui._lineages import LineagesScreen
from edgesync.tui._policy import PolicyScreen
from edgesync.tui._registry import RegistryReviewScreen, RegistryScreen

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


async def test_registry_review_for_two_devices(tui_server: Server,
                                               batches: Callable[..., Any]) -> None:
    pool = pool_of(tui_server)
    tag = uuid.uuid4().hex[:8]
    name, slug = f"reg-{tag}", f"reg-{tag}"
    async with pool.acquire() as conn:
        boot = await identity.bootstrap(conn, org=f"org-reg-{tag}", project=name,
                                        topic_slug=slug)
    assert tui_server.api is not None and tui_server.pipeline is not None
    tui = EdgesyncTui(TuiSettings(tui_server.api.url, boot.token.token, str(boot.org_id),
                                  str(boot.project_id)))
    async with tui.run_test(size=(140, 45)) as pilot:
        # the policy screen switches the project to coalescing
        await until(pilot, lambda: pilot.app.screen.title == "Lineages", "lineages")
        await pilot.press("4")
        policy = await until(pilot, lambda: on(pilot, PolicyScreen), "policy")
        ptable = policy.query_one("#main-table", DataTable)
        await until(pilot, lambda: "schema_coalescing_mode" in rows(ptable), "policy loaded")
        await open_row(pilot, ptable, "schema_coalescing_mode")
        ask = await until(pilot, lambda: on(pilot, AskScreen), "value prompt")
        ask.query_one(Input).value = ""
        await pilot.press(*"project", "enter")
        await until(pilot, lambda: rows(ptable)["schema_coalescing_mode"][1] == '"project"'
                    or rows(ptable)["schema_coalescing_mode"][1] == "project", "coalescing")

        # two devices send the same first schema (the running serve's ingest pipeline)
        for device_name, fleet in (("gw-a", "north"), ("gw-b", "south")):
            async with pool.acquire() as conn:
                device = await edgesync.fleet.add_device(conn, project=name, name=device_name,
                                                         topic_slug=slug, fleet=fleet)
            f = batches("device_state")
            payload = f.payload(f.rows(("insert", {"id": 1, "mode": "heat", "setpoint": 20.5})))
            await tui_server.pipeline.handle(f"{device.root_topic}/sync/rows/batch", payload)

        await pilot.press("5")
        screen = await until(pilot, lambda: on(pilot, RegistryScreen), "registry screen")
        table = screen.query_one("#main-table", DataTable)
        key = await until(pilot, lambda: next(iter(rows(table)), None), "a registry review",
                          refresh=True)
        assert rows(table)[key][2] == "device_state" and rows(table)[key][4] == "queued"
        await open_row(pilot, table, key)
        detail = await until(pilot, lambda: on(pilot, RegistryReviewScreen), "detail")
        await until(pilot, lambda: detail.query("#devices")
                    and len(rows(detail.query_one("#devices", DataTable))) == 2,
                    "two waiting devices")
        devices = detail.query_one("#devices", DataTable)
        assert sorted(c[0] for c in rows(devices).values()) == ["gw-a", "gw-b"]

        await pilot.press("a")
        form = await until(pilot, lambda: on(pilot, ApproveScreen), "approve form")
        assert form.check_action("set", ("defer",)) is False
        assert form.check_action("set", ("ignore",)) is True
        await open_row(pilot, form.query_one("#actions", DataTable), "mode", enter=False)
        await pilot.press("e")
        await until(pilot, lambda: on(pilot, AskScreen), "rename prompt")
        await pilot.press(*"hvac", "enter")
        await until(pilot, lambda: on(pilot, ApproveScreen), "form")
        await until(pilot, lambda: "target table: edge_state_p" in str(
            form.query_one("#preview").render()) and "hvac" in str(
            form.query_one("#preview").render()), "the API's preview of the coalesced target")
        await pilot.press("a")
        await until(pilot, lambda: detail.review and detail.review["status"] == "approved",
                    "registry review approved (claimed first)")
        await until(pilot, lambda: sorted(c[2] for c in rows(devices).values()) == [
            "approved", "approved"], "both devices approved", refresh=True)

        await pilot.press("escape")
        await until(pilot, lambda: on(pilot, RegistryScreen), "registry screen")
        mirrors = screen.query_one("#mirrors", DataTable)
        await until(pilot, lambda: rows(mirrors).get("device_state", [""] * 5)[4] == "2",
                    "one coalesced mirror, two devices", refresh=True)
        await pilot.press("C")
        ask = await until(pilot, lambda: on(pilot, AskScreen), "consolidate prompt")
        assert ask.query_one(Input).value == "device_state"
        await pilot.press("enter")
        await until(pilot, lambda: "device_state: moved 0 lineages" in screen.status_text,
                    "nothing to move: both already write to the coalesced mirror")

        # Lineages: a fleet filter, and the detail names the shared (coalesced) mirror
        await pilot.press("1")
        lineages = await until(pilot, lambda: on(pilot, LineagesScreen), "lineages")
        ltable = lineages.query_one("#main-table", DataTable)
        await until(pilot, lambda: len(rows(ltable)) == 2, "two lineages", refresh=True)
        await pilot.press("F")
        await until(pilot, lambda: on(pilot, AskScreen), "fleet prompt")
        await pilot.press(*"north", "enter")
        await until(pilot, lambda: [c[0] for c in rows(ltable).values()] == ["gw-a"]
                    and "fleet: north" in screen_text(lineages), "only the north fleet")
        await pilot.press("F")
        ask = await until(pilot, lambda: on(pilot, AskScreen), "fleet prompt")
        assert ask.query_one(Input).value == "north"
        ask.query_one(Input).value = ""
        await pilot.press(*"nowhere", "enter")
        await until(pilot, lambda: "no fleet named 'nowhere'" in lineages.status_text
                    and "north, south" in lineages.status_text, "unknown fleet")
        await open_row(pilot, ltable, next(iter(rows(ltable))))
        ldetail = await until(pilot, lambda: on(pilot, LineageDetailScreen), "detail")
        await until(pilot, lambda: "coalesced mirror: shared by 2 devices of the project"
                    in screen_text(ldetail), "coalesced mirror shown")
