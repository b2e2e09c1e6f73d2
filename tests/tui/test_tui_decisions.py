"""Decisions someone else got to first: a claim on a review claimed meanwhile is refused
with ACTION_VERSION_CONFLICT, and the console reloads it (then the decision works at the
new version); a rejection carries the reason typed in; the events pane shows
both, and ``/`` narrows it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kits.e2e_kit import app, running_agent, wait_reviews
from textual.widgets import DataTable
from textual.widgets._footer import FooterKey
from tui_console import make_console
from tui_pilot import on, open_row, rows, screen_text, status, until

from edgesync.client import ApiClient
from edgesync.server import Server
from edgesync.tui._approve import ApproveScreen
from edgesync.tui._confirm import AskScreen
from edgesync.tui._events import EventsScreen
from edgesync.tui._review_detail import ReviewDetailScreen
from edgesync.tui._reviews import ReviewsScreen

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


async def test_stale_review_reload_prompt_and_reject_reason(
        tui_server: Server, tmp_path: Path, mqtt_url: str) -> None:
    console = await make_console(tui_server, tmp_path, mqtt_url, "dec")
    dev = console.device
    app(dev.db, "CREATE TABLE modes (id INTEGER PRIMARY KEY, mode TEXT)",
        "CREATE TABLE junk (id INTEGER PRIMARY KEY, blob BLOB)")
    async with running_agent(dev):
        app(dev.db, "INSERT INTO modes VALUES (1, 'eco')", "INSERT INTO junk VALUES (1, x'00')")
        queued = await wait_reviews(console.pool, dev, {"modes", "junk"})
        s = console.settings
        assert s.token and s.org_id and s.project
        other = ApiClient(s.api_url, token=s.token, org_id=s.org_id).project(s.project)

        tui = console.app()
        async with tui.run_test(size=(140, 45)) as pilot:
            assert tui.feed is not None
            await until(pilot, tui.feed.connected.is_set, "event stream connected")
            await pilot.press("2")
            reviews = await until(pilot, lambda: on(pilot, ReviewsScreen), "reviews")
            table = reviews.query_one("#main-table", DataTable)
            modes = str(queued["modes"].id)
            await until(pilot, lambda: modes in rows(table), "the modes review")
            await open_row(pilot, table, modes)
            detail = await until(pilot, lambda: on(pilot, ReviewDetailScreen), "detail")
            await until(pilot, lambda: detail.review is not None, "loaded")
            assert detail.review is not None and detail.review["action_version"] == 1
            # the device by its name; on an 80-column terminal the footer still ends with
            # "? help" whole (it was cut to "? he▏", issue 27)
            assert f"device: {detail.review['device_name']} (" in screen_text(detail)
            await pilot.resize_terminal(80, 24)
            await pilot.pause()
            keys = {k.key: k.region for k in detail.query(FooterKey)}
            assert keys["question_mark"].right <= 80, keys
            await pilot.resize_terminal(140, 45)

            # someone else claims it meanwhile
            # (in a thread: the server answers on this event loop)
            claimed = await asyncio.to_thread(other.claim, modes, 1)
            assert claimed["action_version"] == 2
            await pilot.press("c")
            # any 409 reloads the review, and the status line says why
            await until(pilot, lambda: "reloaded: the review is in_review at action_version 2"
                        in status(detail), "reloaded")
            assert "ACTION_VERSION_CONFLICT" in status(detail)
            assert "action_version 1 is stale" in status(detail)
            assert "in_review" in screen_text(detail)
            assert detail.check_action("claim", ()) is False  # claimed: c is off

            # now approve at the current version
            await pilot.press("a")
            form = await until(pilot, lambda: on(pilot, ApproveScreen), "approve form")
            # a approves once the preview answered with no refusal
            await until(pilot, lambda: form.check_action("send", ()), "the preview passes")
            await pilot.press("a")
            await until(pilot, lambda: detail.review and detail.review["status"] == "approved",
                        "approved after the reload")
            assert (await asyncio.to_thread(other.review, modes))["decided_by"] == "admin"

            # reject the other one with a reason
            await pilot.press("escape")
            await until(pilot, lambda: on(pilot, ReviewsScreen), "reviews")
            junk = str(queued["junk"].id)
            await open_row(pilot, table, junk)
            detail = await until(pilot, lambda: on(pilot, ReviewDetailScreen)
                                 and pilot.app.screen is not detail and pilot.app.screen,
                                 "junk review")
            await until(pilot, lambda: detail.review is not None, "loaded")
            await pilot.press("x")
            await until(pilot, lambda: on(pilot, AskScreen), "reason prompt")
            await pilot.press(*"not ours", "enter")
            await until(pilot, lambda: detail.review and detail.review["status"] == "rejected",
                        "rejected")
            assert "reason: not ours" in screen_text(detail)
            assert (await asyncio.to_thread(other.review, junk))["decision_reason"] == "not ours"

            # the events pane: what happened since the console started, from the stream
            await pilot.press("3")
            events = await until(pilot, lambda: on(pilot, EventsScreen), "events screen")
            etable = events.query_one("#main-table", DataTable)

            def kinds() -> list[str]:
                return [c[2] for c in rows(etable).values()]

            await until(pilot, lambda: {"schema_review.rejected", "schema_review.approved"}
                        <= set(kinds()), f"decisions in the events pane (has {kinds()})")
            assert kinds().index("schema_review.rejected") < kinds().index(
                "schema_review.approved")  # newest first
            assert "stream: live" in screen_text(events)
            about = next(c[3] for c in rows(etable).values()
                         if c[2] == "schema_review.rejected")
            assert f"review {junk[:8]}" in about
            # /: only the events whose type or subject has the text
            await pilot.press("slash")
            await pilot.press(*"REJECTED", "enter")
            await until(pilot, lambda: set(kinds()) == {"schema_review.rejected"}
                        and "search: 'REJECTED'" in screen_text(events), "events searched")
            await pilot.press("slash", *["backspace"] * 8, "enter")
            await until(pilot, lambda: {"schema_review.rejected", "schema_review.approved"}
                        <= set(kinds()), "search cleared")
        other.client.close()
