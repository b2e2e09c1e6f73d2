"""The console against a real ``edgesync serve`` (PostgreSQL, Mosquitto) and a real agent:
first schemas queue reviews, the console searches lineages, claims and approves with its
own column actions (rename, type, ignore, defer), the written view shows the rows the
cloud wrote (state mirror and telemetry); a poisoned target trips the circuit breaker,
which x resets; D deletes after a confirmation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from kits.e2e_kit import app, running_agent, sqlite_rows, target_of
from textual.widgets import DataTable, Input, ProgressBar
from tui_console import make_console
from tui_pilot import column_names, composed, on, open_row, rows, screen_text, shot, status, until

from edgesync.materialize import quote_ident
from edgesync.server import Server
from edgesync.tui._approve import ApproveScreen
from edgesync.tui._confirm import AskScreen, ConfirmScreen
from edgesync.tui._help import HelpScreen
from edgesync.tui._lineage_detail import LineageDetailScreen
from edgesync.tui._lineages import LineagesScreen
from edgesync.tui._review_detail import ReviewDetailScreen
from edgesync.tui._reviews import ReviewsScreen
from edgesync.tui._rows import RowsScreen

# A terminal test (Textual pilot): run once, in the asyncio pass (a screen raced its
# widgets once under uvloop in CI, session 8).
pytestmark = [pytest.mark.e2e, pytest.mark.once, pytest.mark.timeout(180)]

SCHEMA = (
    "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT, level INTEGER, note TEXT)",
    "CREATE TABLE readings (id INTEGER PRIMARY KEY, ts TEXT NOT NULL, temp REAL)",
    "CREATE TABLE alarms (id INTEGER PRIMARY KEY, code TEXT, extra TEXT)",
)
T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)


def by_table(table: DataTable[object], column: int, name: str) -> str | None:
    """The key of the row whose cell ``column`` is ``name``."""
    return next((k for k, c in rows(table).items() if c[column] == name), None)


async def test_review_approve_written_reset_delete(tui_server: Server, tmp_path: Path,
                                                   mqtt_url: str) -> None:
    console = await make_console(tui_server, tmp_path, mqtt_url, "tui",
                                 telemetry={"readings": "ts"},
                                 policy={"materialization_breaker_threshold": 1})
    dev = console.device
    app(dev.db, *SCHEMA)
    async with running_agent(dev):
        # Written once the agent's triggers are in place.
        app(dev.db, ("INSERT INTO settings VALUES (?, ?, ?, ?)",
             [(f"k{i:02}", f"v[{i}]", i, f"n{i}") for i in range(1, 13)]),
            ("INSERT INTO readings VALUES (?, ?, ?)",
             [(i, (T0 + timedelta(seconds=i)).isoformat(), 20 + i / 4) for i in range(1, 31)]),
            ("INSERT INTO alarms VALUES (?, ?, ?)", [(i, f"A{i}", "x") for i in range(1, 4)]))
        tui = console.app()
        async with tui.run_test(size=(140, 45)) as pilot:
            # ---- Lineages: three tables waiting for review
            lineages = await until(pilot, lambda: on(pilot, LineagesScreen), "lineages")
            table = lineages.query_one("#main-table", DataTable)
            await until(pilot, lambda: len(rows(table)) == 3
                        and all(c[4] == "review required" for c in rows(table).values()),
                        "three lineages paused for review", refresh=True)
            assert column_names(table)[:5] == ["device", "table", "pipeline", "status",
                                               "pause reason"]
            assert {c[1]: c[2] for c in rows(table).values()} == {
                "settings": "rows", "readings": "telemetry", "alarms": "rows"}
            assert all(c[8] != "-" for c in rows(table).values())  # last batch time
            shot(pilot, "lineages")

            await pilot.press("question_mark")
            help_ = await until(pilot, lambda: composed(pilot, HelpScreen), "help overlay")
            assert "Keys: Lineages" in help_.plain
            for line in ("/       filter", "f       status", "n       next page",
                         "r       refresh", "q       quit"):
                assert line in help_.plain, help_.plain
            await pilot.press("escape")
            await until(pilot, lambda: on(pilot, LineagesScreen), "help closed")

            # / searches on the server
            await pilot.press("slash")
            assert isinstance(tui.focused, Input)
            await pilot.press(*"ALARM", "enter")
            await until(pilot, lambda: [c[1] for c in rows(table).values()] == ["alarms"],
                        "search narrowed to alarms")
            assert "search: 'ALARM'" in screen_text(lineages)
            await pilot.press("slash", *["backspace"] * 5, "enter")
            await until(pilot, lambda: len(rows(table)) == 3, "search cleared")

            # ---- Schema reviews: open ones first (as the console), f cycles the status
            await pilot.press("2")
            reviews = await until(pilot, lambda: on(pilot, ReviewsScreen), "reviews screen")
            rtable = reviews.query_one("#main-table", DataTable)
            await until(pilot, lambda: "filter: Open (queued or in review)" in screen_text(
                reviews) and len(rows(rtable)) == 3, "three open reviews")
            await pilot.press("f")
            await until(pilot, lambda: "filter: All" in screen_text(reviews)
                        and len(rows(rtable)) == 3, "all")
            await pilot.press("f")
            await until(pilot, lambda: "filter: Queued" in screen_text(reviews)
                        and len(rows(rtable)) == 3, "queued filter")
            await pilot.press("f")
            await until(pilot, lambda: "filter: In review" in screen_text(reviews)
                        and not rows(rtable), "in-review filter: none yet")
            seen = []
            for _ in range(4):  # Approved, Rejected, Abandoned, Open
                await pilot.press("f")
                seen.append(reviews.filter_label)
            assert seen == ["Approved", "Rejected", "Abandoned", "Open (queued or in review)"]
            await until(pilot, lambda: "filter: Open" in screen_text(reviews)
                        and len(rows(rtable)) == 3, "back to open")

            # ---- settings: claim, then approve with a rename, a type and an ignore
            await open_row(pilot, rtable, by_table(rtable, 2, "settings") or "")
            detail = await until(pilot, lambda: on(pilot, ReviewDetailScreen), "review")
            ctable = detail.query_one("#columns", DataTable)
            await until(pilot, lambda: len(rows(ctable)) == 4, "review columns")
            assert sorted((c[0], c[4]) for c in rows(ctable).values()) == [
                ("key", "added"), ("level", "added"), ("note", "added"), ("value", "added")]
            assert "queued" in screen_text(detail)
            shot(pilot, "review")
            await pilot.press("c")
            await until(pilot, lambda: detail.review and detail.review["status"] == "in_review"
                        and "in_review" in screen_text(detail), "claimed")

            await pilot.press("a")
            form = await until(pilot, lambda: on(pilot, ApproveScreen), "approve form")
            atable = form.query_one("#actions", DataTable)

            def preview() -> str:
                return str(form.query_one("#preview").render())

            await open_row(pilot, atable, "value", enter=False)
            # a name another column has: the API's preview refuses it before approval
            await pilot.press("e")
            await until(pilot, lambda: on(pilot, AskScreen), "rename prompt")
            await pilot.press(*"key", "enter")
            await until(pilot, lambda: "refused: value: name taken" in preview()
                        and "fix: give one of them another mirror_column_name" in preview()
                        and rows(atable)["value"][8] == "name taken"
                        and form.check_action("send", ()) is False,
                        "the preview refuses a duplicate column name, a is off")
            await pilot.press("e")
            ask = await until(pilot, lambda: on(pilot, AskScreen), "rename prompt")
            ask.query_one(Input).value = ""
            await pilot.press(*"setting_value", "enter")
            await until(pilot, lambda: on(pilot, ApproveScreen), "back on the form")
            await open_row(pilot, atable, "level", enter=False)
            await pilot.press("t", "t", "t")  # bigint → double precision → numeric
            await open_row(pilot, atable, "note", enter=False)
            await pilot.press("i")
            await until(pilot, lambda: "target columns: key text primary key, level numeric, "
                        "setting_value text" in preview() and "not synced: note" in preview()
                        and form.check_action("send", ()), "the API's preview of the target")
            assert "target table: edge_state_" in preview()
            shot(pilot, "approve")
            await pilot.press("a")
            await until(pilot, lambda: on(pilot, ReviewDetailScreen) and detail.review
                        and detail.review["status"] == "approved", "approved")
            await until(pilot, lambda: {c[0]: c[5] for c in rows(ctable).values()} == {
                "key": "mirror", "value": "mirror as setting_value",
                "level": "mirror (numeric)", "note": "ignore"}, "decided actions shown")

            # the written view: the state mirror, with the column renamed
            want = sqlite_rows(dev.db, "SELECT key, value, level FROM settings ORDER BY key")
            await pilot.press("w")
            viewer = await until(pilot, lambda: on(pilot, RowsScreen), "rows viewer")
            vtable = viewer.query_one("#main-table", DataTable)

            def written() -> list[tuple[str, str, str]]:
                names = column_names(vtable)
                if "setting_value" not in names:
                    return []
                ix = [names.index(n) for n in ("key", "setting_value", "level")]
                return sorted((c[ix[0]], c[ix[1]], c[ix[2]]) for c in rows(vtable).values())

            expect = [(k, v, str(level)) for k, v, level in want]
            await until(pilot, lambda: written() == expect, "mirror rows", refresh=True)
            assert "note" not in column_names(vtable)
            shot(pilot, "written")
            assert "source: written: state mirror edge_state_" in screen_text(viewer)
            await pilot.press("s")
            await until(pilot, lambda: "source: staged rows" in screen_text(viewer),
                        "staged view")
            await pilot.press("escape", "escape")
            await until(pilot, lambda: on(pilot, ReviewsScreen), "back to reviews")

            # ---- readings: approve as proposed (a claims first); written = telemetry
            await until(pilot, lambda: by_table(rtable, 2, "readings"), "readings review")
            await open_row(pilot, rtable, by_table(rtable, 2, "readings") or "")
            detail = await until(pilot, lambda: on(pilot, ReviewDetailScreen)
                                 and pilot.app.screen is not detail and pilot.app.screen,
                                 "readings review")
            await until(pilot, lambda: detail.review is not None, "loaded")
            await pilot.press("a")
            await until(pilot, lambda: on(pilot, ApproveScreen), "approve form")
            await pilot.press("a")
            await until(pilot, lambda: detail.review and detail.review["status"] == "approved",
                        "readings approved")
            await pilot.press("w")
            viewer = await until(pilot, lambda: on(pilot, RowsScreen), "telemetry rows")
            vtable = viewer.query_one("#main-table", DataTable)
            await until(pilot, lambda: len(rows(vtable)) == 30, "30 samples", refresh=True)
            assert "source: written: telemetry edge_ts_" in screen_text(viewer)
            assert {"event_ts", "temp"} <= set(column_names(vtable))
            await pilot.press("escape", "escape")

            # ---- alarms: defer a column; the lineage waits, its rows stay staged
            await until(pilot, lambda: on(pilot, ReviewsScreen), "reviews")
            await open_row(pilot, rtable, by_table(rtable, 2, "alarms") or "")
            detail = await until(pilot, lambda: on(pilot, ReviewDetailScreen)
                                 and pilot.app.screen is not detail and pilot.app.screen,
                                 "alarms review")
            await until(pilot, lambda: detail.review is not None, "loaded")
            await pilot.press("a")
            form = await until(pilot, lambda: on(pilot, ApproveScreen), "approve form")
            await open_row(pilot, form.query_one("#actions", DataTable), "extra", enter=False)
            await pilot.press("f")
            await until(pilot, lambda: "deferred (the lineage stays paused until decided): "
                        "extra" in str(form.query_one("#preview").render()), "defer previewed")
            await pilot.press("a")
            await until(pilot, lambda: detail.review and detail.review["status"] == "approved",
                        "alarms approved with a deferred column")

            await pilot.press("1")
            await until(pilot, lambda: on(pilot, LineagesScreen), "lineages again")
            await until(pilot, lambda: {c[1]: (c[3], c[4]) for c in rows(table).values()} == {
                "settings": ("active", "-"), "readings": ("active", "-"),
                "alarms": ("paused", "deferred columns")}, "statuses after approval",
                refresh=True)

            # ---- the circuit breaker: a target that refuses every batch (a mirrored
            # column renamed away: a row's own bad value is quarantined, not a trip); x resets
            pool = console.pool
            target = await target_of(pool, dev, "settings")
            await pool.execute(f"ALTER TABLE {quote_ident(target)} RENAME COLUMN level "
                               "TO poison")
            app(dev.db, "INSERT INTO settings VALUES ('bad', 'b', 5000, 'x')")
            key = await until(pilot, lambda: next(
                (k for k, c in rows(table).items()
                 if c[1] == "settings" and c[4] == "circuit breaker"), None),
                "settings paused by the breaker", refresh=True)
            await open_row(pilot, table, key)
            ldetail = await until(pilot, lambda: on(pilot, LineageDetailScreen), "detail")
            await until(pilot, lambda: "circuit breaker" in screen_text(ldetail)
                        and "level" in screen_text(ldetail), "breaker and its error shown")
            assert ldetail.check_action("reset", ()) is True
            shot(pilot, "lineage-breaker")
            await pool.execute(f"ALTER TABLE {quote_ident(target)} RENAME COLUMN poison "
                               "TO level")
            await pilot.press("x")
            await until(pilot, lambda: "materialization reset" in status(ldetail), "reset")
            await until(pilot, lambda: ldetail.lineage and ldetail.lineage["status"] == "active"
                        and "no errors" in screen_text(ldetail), "resumed", refresh=True)
            assert ldetail.check_action("reset", ()) is False  # no error: x is off again
            # the replay of the requeued batch: its progress bar fills
            await until(pilot, lambda: ldetail.lineage and ldetail.lineage["replay"][
                "pending_intents"] == 0 and ldetail.lineage["staged_rows"] == 0,
                "replay done", refresh=True)
            await until(pilot, lambda: "latest replay: done" in screen_text(ldetail),
                        "replay state shown")
            bar = ldetail.query_one("#replay-bar", ProgressBar)
            assert bar.percentage == 1
            assert await pool.fetchval(f"SELECT level FROM {quote_ident(target)} "
                                       "WHERE key = 'bad'") == 5000

            # ---- delete: n keeps it, y deletes it
            lineage_id = ldetail.lineage_id
            await pilot.press("D")
            confirm = await until(pilot, lambda: on(pilot, ConfirmScreen), "confirmation")
            assert "Delete lineage" in str(confirm.query_one("#question").render())
            await pilot.press("n")
            await until(pilot, lambda: "delete cancelled" in status(ldetail), "cancelled")
            assert on(pilot, LineageDetailScreen) is ldetail
            await pilot.press("D")
            await until(pilot, lambda: on(pilot, ConfirmScreen), "confirmation again")
            await pilot.press("y")
            await until(pilot, lambda: on(pilot, LineagesScreen)
                        and lineage_id not in rows(table), "deleted lineage gone")
            assert await pool.fetchval("SELECT count(*) FROM edge_table_lineages WHERE id = $1",
                                       lineage_id) == 0
