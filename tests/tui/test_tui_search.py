"""``/`` on the Policy, Registry and Quarantine screens, against a real ``edgesync serve``:
the policy's fields filtered in the console (one object), registry reviews and coalesced
mirrors and quarantined rows searched on the server (``q=``, so every page), ``_`` and
``%`` taken as themselves, and the screens' keys not taken while the search is typed."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from kits.e2e_kit import approve, eventually, pool_of, wait_lineage
from textual.pilot import Pilot
from textual.widgets import DataTable, Input
from tui_console import make_console
from tui_pilot import composed, on, open_row, rows, screen_text, status, until

from edgesync import fleet, governance, identity
from edgesync.server import Server
from edgesync.tui import EdgesyncTui, TuiSettings
from edgesync.tui._confirm import AskScreen, ConfirmScreen
from edgesync.tui._help import HelpScreen
from edgesync.tui._lineage_detail import LineageDetailScreen
from edgesync.tui._lineages import LineagesScreen
from edgesync.tui._policy import PolicyScreen
from edgesync.tui._quarantine import QuarantineScreen
from edgesync.tui._registry import RegistryScreen
from edgesync.tui._search import SearchScreen

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


async def search(pilot: Pilot[Any], text: str) -> None:
    """``/``, the search box emptied, ``text`` typed key by key, Enter."""
    screen = pilot.app.screen
    assert isinstance(screen, SearchScreen)
    await pilot.press("slash")
    box = screen.query_one("#filter", Input)
    assert pilot.app.focused is box
    box.value = ""
    await pilot.press(*text, "enter")


async def help_lists_search(pilot: Pilot[Any], kind: type[SearchScreen]) -> None:
    await pilot.press("question_mark")
    help_ = await until(pilot, lambda: composed(pilot, HelpScreen), "help overlay")
    assert "/       filter" in help_.plain, help_.plain
    await pilot.press("escape")
    await until(pilot, lambda: on(pilot, kind), "help closed")


async def test_search_policy_and_registry(tui_server: Server,
                                          batches: Callable[..., Any]) -> None:
    pool = pool_of(tui_server)
    tag = uuid.uuid4().hex[:8]
    name = slug = f"find-{tag}"
    async with pool.acquire() as conn:
        boot = await identity.bootstrap(conn, org=f"org-find-{tag}", project=name,
                                        topic_slug=slug)
    assert tui_server.api is not None and tui_server.pipeline is not None
    tui = EdgesyncTui(TuiSettings(tui_server.api.url, boot.token.token, str(boot.org_id),
                                  str(boot.project_id)))
    async with tui.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: on(pilot, LineagesScreen), "lineages")

        # Policy: the fields filtered by name or description, and the filtered row edited
        await pilot.press("4")
        policy = await until(pilot, lambda: on(pilot, PolicyScreen), "policy")
        ptable = policy.query_one("#main-table", DataTable)
        await until(pilot, lambda: len(rows(ptable)) > 5, "every field")
        every = len(rows(ptable))
        await help_lists_search(pilot, PolicyScreen)
        await search(pilot, "COALESC")
        await until(pilot, lambda: list(rows(ptable)) == ["schema_coalescing_mode"]
                    and "search: 'COALESC'" in screen_text(policy), "one field")
        await search(pilot, "circuit breaker")  # its description, not its name
        await until(pilot, lambda: list(rows(ptable)) == ["materialization_breaker_threshold"],
                    "found by what it does")
        await search(pilot, "coalescing")
        await until(pilot, lambda: list(rows(ptable)) == ["schema_coalescing_mode"], "again")
        await open_row(pilot, ptable, "schema_coalescing_mode")
        ask = await until(pilot, lambda: on(pilot, AskScreen), "value prompt")
        ask.query_one(Input).value = ""
        await pilot.press(*"project", "enter")
        await until(pilot, lambda: "project" in rows(ptable)["schema_coalescing_mode"][1]
                    and len(rows(ptable)) == 1, "set, the search kept")
        await search(pilot, "")
        await until(pilot, lambda: len(rows(ptable)) == every, "search cleared")

        # three devices, three tables: three registry reviews
        for device_name, table in (("gw_a1", "valve_x"), ("gw-b1", "valvesx"),
                                   ("gw-c1", "pumps")):
            async with pool.acquire() as conn:
                device = await fleet.add_device(conn, project=name, name=device_name,
                                                topic_slug=slug)
            f = batches(table)
            await tui_server.pipeline.handle(
                f"{device.root_topic}/sync/rows/batch",
                f.payload(f.rows(("insert", {"id": 1, "mode": "heat", "setpoint": 20.5}))))
        approved = [await _approve_registry(pool, boot.project_id, t)
                    for t in ("valve_x", "valvesx")]
        assert all(approved)

        await pilot.press("5")
        screen = await until(pilot, lambda: on(pilot, RegistryScreen), "registry")
        table = screen.query_one("#main-table", DataTable)
        mirrors = screen.query_one("#mirrors", DataTable)

        def tables() -> tuple[list[str], list[str]]:
            return sorted(c[2] for c in rows(table).values()), sorted(rows(mirrors))

        # The open review first; f: all of them (the search covers the filter shown)
        await until(pilot, lambda: tables() == (["pumps"], ["valve_x", "valvesx"]),
                    "the open review", refresh=True)
        await pilot.press("f")
        await until(pilot, lambda: tables() == (["pumps", "valve_x", "valvesx"],
                                                ["valve_x", "valvesx"]),
                    "three reviews, two mirrors", refresh=True)
        await help_lists_search(pilot, RegistryScreen)
        await search(pilot, "e_x")  # "_" is itself: not valvesx
        await until(pilot, lambda: tables() == (["valve_x"], ["valve_x"])
                    and "search: 'e_x'" in screen_text(screen), "valve_x only")
        await search(pilot, "GW-B")  # a waiting device's name, any case
        await until(pilot, lambda: tables() == (["valvesx"], ["valvesx"]), "gw-b1's")
        await search(pilot, "pumps")  # p (previous page) typed, not taken as the key
        await until(pilot, lambda: tables() == (["pumps"], []), "pumps: not approved")
        await search(pilot, "%")
        await until(pilot, lambda: tables() == ([], []) and "0 of 0 reviews"
                    in screen_text(screen), "nothing")
        await pilot.press("slash")
        await pilot.press("escape")  # Esc closes the box, the screen stays
        await until(pilot, lambda: not screen.searching and on(pilot, RegistryScreen),
                    "box closed")
        await search(pilot, "")
        await until(pilot, lambda: tables() == (["pumps", "valve_x", "valvesx"],
                                                ["valve_x", "valvesx"]), "search cleared")


async def _approve_registry(pool: asyncpg.Pool, project_id: uuid.UUID, table: str) -> bool:
    async with pool.acquire() as conn:
        (review,) = [r for r in await governance.list_registry_reviews(conn, project_id,
                                                                       status="queued")
                     if r.source_table == table]
        claimed = await governance.claim_registry_review(
            conn, review.id, actor="op", action_version=review.action_version,
            project_id=project_id)
        done = await governance.approve_registry_review(
            conn, review.id, actor="op", action_version=claimed.action_version,
            column_actions=None, project_id=project_id)
    return bool(done.status == "approved")


async def test_search_quarantine(tui_server: Server, tmp_path: Path, mqtt_url: str,
                                 batches: Callable[..., Any]) -> None:
    console = await make_console(tui_server, tmp_path, mqtt_url, "findq")
    dev, pool = console.device, console.pool
    assert tui_server.pipeline is not None
    f = batches("device_state")
    topic = f"{dev.root}/sync/rows/batch"
    await tui_server.pipeline.handle(topic, f.payload(f.rows(
        ("insert", {"id": 1, "mode": "heat", "setpoint": 20.5}))))
    await approve(pool, dev, "device_state")
    rec = await wait_lineage(pool, dev, "device_state", lambda r: r["status"] == "active",
                             "approved and live")
    # strings for a REAL column: quarantined, the fine row written
    await tui_server.pipeline.handle(topic, f.payload(f.rows(
        ("insert", {"id": 3, "mode": "50%", "setpoint": "hot"}),
        ("insert", {"id": 4, "mode": "eco_plus", "setpoint": "warm"}),
        ("insert", {"id": 5, "mode": "ecoXplus", "setpoint": "cool"}),
        ("insert", {"id": 6, "mode": "fine", "setpoint": 6.0}))))

    async def quarantined() -> bool:
        n = await pool.fetchval("SELECT count(*) FROM edge_quarantined_rows "
                                "WHERE lineage_id = $1 AND status = 'open'", rec["id"])
        return int(n) == 3

    await eventually(quarantined, what="three rows quarantined")

    tui = console.app()
    async with tui.run_test(size=(160, 45)) as pilot:
        lineages = await until(pilot, lambda: on(pilot, LineagesScreen), "lineages")
        ltable = lineages.query_one("#main-table", DataTable)
        await until(pilot, lambda: len(rows(ltable)) == 1, "the lineage", refresh=True)
        await open_row(pilot, ltable, next(iter(rows(ltable))))
        await until(pilot, lambda: on(pilot, LineageDetailScreen), "detail")
        await pilot.press("Q")
        quar = await until(pilot, lambda: on(pilot, QuarantineScreen), "quarantine")
        table = quar.query_one("#main-table", DataTable)

        def keys() -> list[str]:
            return [c[4] for c in rows(table).values()]

        await until(pilot, lambda: keys() == ['{"id":3}', '{"id":4}', '{"id":5}'], "three rows")
        await help_lists_search(pilot, QuarantineScreen)
        await search(pilot, "co_plus")  # a value; "_" is itself
        await until(pilot, lambda: keys() == ['{"id":4}']
                    and "search: 'co_plus'" in screen_text(quar), "eco_plus only")
        await search(pilot, "ecoX")  # e (edit) and X (discard all) typed, not taken as keys
        await until(pilot, lambda: keys() == ['{"id":5}'], "ecoXplus only")
        assert on(pilot, QuarantineScreen) and "1 rows" in screen_text(quar)
        await search(pilot, "50%")
        await until(pilot, lambda: keys() == ['{"id":3}'], "the % row only")
        await search(pilot, "VALUE_TYPE_MISMATCH")  # the reason code
        await until(pilot, lambda: len(keys()) == 3, "all three")

        # a row of the search's result is the one acted on
        await search(pilot, "ecox")
        await until(pilot, lambda: keys() == ['{"id":5}'], "ecoXplus again")
        await pilot.press("x")
        await until(pilot, lambda: on(pilot, ConfirmScreen), "discard confirmation")
        await pilot.press("y")
        await until(pilot, lambda: "1 quarantined row(s) discarded" in status(quar)
                    and keys() == [], "discarded")
        assert await pool.fetchval(
            "SELECT array_agg(row_json::jsonb->'pk'->>'id' ORDER BY id) "
            "FROM edge_quarantined_rows WHERE lineage_id = $1", rec["id"]) == ["3", "4"]
        await search(pilot, "")
        await until(pilot, lambda: keys() == ['{"id":3}', '{"id":4}'], "search cleared")
