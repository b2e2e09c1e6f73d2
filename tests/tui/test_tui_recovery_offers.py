"""The lineage detail's **Recovery** section against a real ``edgesync serve`` (batches and
the device's gap report through its ingest pipeline): a capture gap offers a whole-table
re-snapshot and ``a`` requests it after a confirmation; a lineage re-created after a
delete offers a verification and ``a`` requests that (docs/recovery.md, docs/tui.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from kits.review_helpers import approve
from textual.widgets import DataTable, Static
from tui_console import make_console
from tui_pilot import composed, on, open_row, rows, status, until

from edgesync.client import ApiClient
from edgesync.protocol import uuid7
from edgesync.server import Server
from edgesync.tui._confirm import ConfirmScreen
from edgesync.tui._help import HelpScreen
from edgesync.tui._lineage_detail import LineageDetailScreen
from edgesync.tui._lineages import LineagesScreen

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

ROWS = (("insert", {"id": 1, "mode": "heat", "setpoint": 20.5}),
        ("insert", {"id": 2, "mode": "cool", "setpoint": None}))


def recovery(detail: LineageDetailScreen) -> str:
    return str(detail.query_one("#recovery", Static).render())


async def test_the_offered_recovery_shows_and_a_takes_it(
        tui_server: Server, tmp_path: Path, mqtt_url: str,
        batches: Callable[..., Any]) -> None:
    console = await make_console(tui_server, tmp_path, mqtt_url, "ofr")
    dev, pool = console.device, console.pool
    s = console.settings
    assert s.token and s.org_id and s.project and tui_server.pipeline is not None
    api = ApiClient(s.api_url, token=s.token, org_id=s.org_id).project(s.project)
    f = batches("device_state")
    out = await tui_server.pipeline.handle(f"{dev.root}/sync/rows/batch",
                                           f.payload(f.rows(*ROWS)))
    lineage_id = out.lineage_id
    await approve(pool, lineage_id)
    gap = await tui_server.pipeline.handle(f"{dev.root}/sync/ingest/request", orjson.dumps({
        "format_version": 1, "request_kind": "gap_report", "source_table": "device_state",
        "journal_epoch": uuid7(), "first_commit_seq": 10, "last_commit_seq": 99}))
    gap_id = await pool.fetchval("SELECT id FROM edge_capture_gaps WHERE lineage_id = $1",
                                 lineage_id)
    assert gap.lineage_id == lineage_id and gap_id is not None

    tui = console.app()
    async with tui.run_test(size=(150, 50)) as pilot:
        lineages = await until(pilot, lambda: on(pilot, LineagesScreen), "lineages")
        table = lineages.query_one("#main-table", DataTable)
        await until(pilot, lambda: len(rows(table)) == 1, "the lineage", refresh=True)
        await open_row(pilot, table, str(lineage_id))
        detail = await until(pilot, lambda: on(pilot, LineageDetailScreen), "detail")
        await until(pilot, lambda: "offered: re-snapshot the whole table" in recovery(detail),
                    "the offer")
        text = recovery(detail)
        assert f"capture gap {gap_id}, since " in text and "a takes it" in text
        assert "dropped commit_seq 10..99" in text and "last re-snapshot: none" in text
        await pilot.press("question_mark")
        help_ = await until(pilot, lambda: composed(pilot, HelpScreen), "help")
        assert "a       take the offered recovery…" in help_.plain
        await pilot.press("escape")
        await until(pilot, lambda: on(pilot, LineageDetailScreen), "help closed")

        # a, then n: nothing requested
        await pilot.press("a")
        confirm = await until(pilot, lambda: on(pilot, ConfirmScreen), "the question")
        question = str(confirm.query_one("#question").render())
        assert question.startswith("Re-snapshot the whole table of dev-ofr-") and \
            "local_retention_bytes" in question, question
        await pilot.press("n")
        await until(pilot, lambda: status(detail) == "cancelled", "cancelled")
        assert await pool.fetchval("SELECT count(*) FROM edge_resnapshots WHERE "
                                   "lineage_id = $1", lineage_id) == 0
        # a, then y: the whole table is asked for; the offer waits for its outcome
        await pilot.press("a")
        await until(pilot, lambda: on(pilot, ConfirmScreen), "the question")
        await pilot.press("y")
        await until(pilot, lambda: "re-snapshot requested (" in status(detail), "requested")
        job = await pool.fetchrow("SELECT * FROM edge_resnapshots WHERE lineage_id = $1",
                                  lineage_id)
        assert job is not None and (job["status"], dict(job["filter"])) == ("requested", {})
        await until(pilot, lambda: "nothing offered" in recovery(detail)
                    and "last re-snapshot: requested" in recovery(detail), "under way")

        # Deleted and re-created (the device starts the table over): verify is offered.
        deleted = await asyncio.to_thread(api.delete_lineage, str(lineage_id))
        assert deleted["next_step"]["action"] == "verify"
        await pilot.press("escape")
        out = await tui_server.pipeline.handle(f"{dev.root}/sync/rows/batch",
                                               f.payload(f.rows(*ROWS)))
        new_id = out.lineage_id
        assert new_id not in (None, lineage_id)
        await approve(pool, new_id)
        await until(pilot, lambda: str(new_id) in rows(table), "the new lineage",
                    refresh=True)
        await open_row(pilot, table, str(new_id))
        detail = await until(pilot, lambda: (d := on(pilot, LineageDetailScreen)) is not None
                             and d.lineage_id == str(new_id) and d, "the new detail")
        await until(pilot, lambda: "offered: verify the table — re-created after a delete"
                    in recovery(detail), "the verify offer")
        await pilot.press("a")
        confirm = await until(pilot, lambda: on(pilot, ConfirmScreen), "the question")
        assert str(confirm.query_one("#question").render()).startswith("Verify the table of")
        await pilot.press("y")
        await until(pilot, lambda: "verification requested (" in status(detail), "requested")
        verification = await pool.fetchrow("SELECT * FROM edge_verifications WHERE "
                                           "lineage_id = $1", new_id)
        assert verification is not None and verification["status"] == "requested"
        assert verification["repair"] is False
        await until(pilot, lambda: "nothing offered" in recovery(detail), "under way")
    api.client.close()
