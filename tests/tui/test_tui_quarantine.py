"""The quarantine in the console, against a real ``edgesync serve`` and a real agent: SQLite
turns an overflowing INTEGER into a REAL, the cloud quarantines that row while the table
flows; the lineage detail counts it, ``q`` lists it with its reason, ``t`` retries it as
it is (refused again), ``e`` edits the value and retries it (written), ``x`` discards
another after a confirmation."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest
from kits.e2e_kit import app, approve, eventually, lineage, running_agent, target_of, wait_equal
from textual.widgets import DataTable, Input
from tui_console import make_console
from tui_pilot import composed, on, open_row, rows, screen_text, shot, status, until

from edgesync.materialize import quote_ident
from edgesync.server import Server
from edgesync.tui._confirm import AskScreen, ConfirmScreen
from edgesync.tui._help import HelpScreen
from edgesync.tui._lineage_detail import LineageDetailScreen
from edgesync.tui._lineages import LineagesScreen
from edgesync.tui._quarantine import QuarantineScreen

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

COLS = ["id", "v", "n"]
TOO_BIG = "9223372036854775808"  # SQLite stores it as REAL 9.223372036854776e18


async def open_count(pool: asyncpg.Pool, lineage_id: object) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM edge_quarantined_rows "
                                   "WHERE lineage_id = $1 AND status = 'open'", lineage_id))


async def test_quarantine_view_retry_edit_and_discard(tui_server: Server, tmp_path: Path,
                                                      mqtt_url: str) -> None:
    console = await make_console(tui_server, tmp_path, mqtt_url, "tuiq")
    dev, pool = console.device, console.pool
    app(dev.db, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT, n INTEGER)")
    async with running_agent(dev):
        app(dev.db, ("INSERT INTO t VALUES (?, ?, ?)", [(i, f"v{i}", i) for i in range(1, 6)]))
        await approve(pool, dev, "t")
        await wait_equal(pool, dev, "t", COLS)
        app(dev.db, "BEGIN", f"INSERT INTO t VALUES (100, 'big', {TOO_BIG})",
            "INSERT INTO t VALUES (101, 'fine', 1)", "COMMIT")
        rec = await lineage(pool, dev, "t")
        assert rec is not None
        await eventually(lambda: _has(pool, rec["id"], 1), what="row 100 quarantined")
        target = quote_ident(await target_of(pool, dev, "t"))

        tui = console.app()
        async with tui.run_test(size=(160, 45)) as pilot:
            lineages = await until(pilot, lambda: on(pilot, LineagesScreen), "lineages")
            table = lineages.query_one("#main-table", DataTable)
            await until(pilot, lambda: len(rows(table)) == 1, "the lineage", refresh=True)
            await open_row(pilot, table, next(iter(rows(table))))
            detail = await until(pilot, lambda: on(pilot, LineageDetailScreen), "detail")
            await until(pilot, lambda: "quarantined rows: 1 open" in screen_text(detail),
                        "the detail counts the quarantined row")

            await pilot.press("question_mark")
            help_ = await until(pilot, lambda: composed(pilot, HelpScreen), "help overlay")
            assert "Q       quarantined rows" in help_.plain, help_.plain
            await pilot.press("escape")
            await until(pilot, lambda: on(pilot, LineageDetailScreen), "help closed")

            await pilot.press("Q")
            quar = await until(pilot, lambda: on(pilot, QuarantineScreen), "quarantine view")
            qtable = quar.query_one("#main-table", DataTable)
            await until(pilot, lambda: len(rows(qtable)) == 1, "one quarantined row")
            (row_id, cells), = rows(qtable).items()
            assert cells[1:7] == ["open", cells[2], "insert", '{"id":100}',
                                  "value_type_mismatch", "rows[0].row.n"], cells
            assert "filter: Open" in screen_text(quar) and "1 rows" in screen_text(quar)

            await pilot.press("question_mark")
            help_ = await until(pilot, lambda: composed(pilot, HelpScreen), "quarantine keys")
            for line in ("t       retry row", "e       edit values and retry…",
                         "T       retry all open rows", "x       discard row…",
                         "X       discard all…", "f       status filter"):
                assert line in help_.plain, help_.plain
            await pilot.press("escape")
            await until(pilot, lambda: on(pilot, QuarantineScreen), "help closed")

            # t: retried as it is, refused again (the value still does not fit)
            await pilot.press("t")
            await until(pilot, lambda: "refused again" in status(quar), "refused again")
            assert "value_type_mismatch" in status(quar)
            await until(pilot, lambda: rows(qtable).get(row_id, [""] * 9)[8] == "1",
                        "one attempt counted")
            shot(pilot, "quarantine")

            # e: the value edited, then written
            await pilot.press("e")
            ask = await until(pilot, lambda: on(pilot, AskScreen), "edit prompt")
            assert ask.query_one(Input).value == '{"v":"big","n":9.223372036854776e+18}'
            ask.query_one(Input).value = '{"v":"big","n":9223372036854775807}'
            await pilot.press("enter")
            await until(pilot, lambda: f"row {row_id} written" in status(quar), "written")
            await until(pilot, lambda: not rows(qtable), "no open row left")
            assert await pool.fetchval(f"SELECT n FROM {target} WHERE id = 100") == 2**63 - 1
            await pilot.press("f")  # All: the retried row is kept, as retried
            await until(pilot, lambda: "filter: All" in screen_text(quar)
                        and [c[1] for c in rows(qtable).values()] == ["retried"], "all rows")

            # another poisoned row; x discards it after y
            app(dev.db, f"INSERT INTO t VALUES (102, 'big2', {TOO_BIG})")
            await eventually(lambda: _has(pool, rec["id"], 1), what="row 102 quarantined")
            await pilot.press("f", "f", "f")  # Superseded, Retried, back to Open
            await until(pilot, lambda: "filter: Open" in screen_text(quar)
                        and len(rows(qtable)) == 1, "row 102 listed", refresh=True)
            await pilot.press("x")
            await until(pilot, lambda: on(pilot, ConfirmScreen), "discard confirmation")
            await pilot.press("n")
            await until(pilot, lambda: "discard cancelled" in status(quar), "cancelled")
            assert await open_count(pool, rec["id"]) == 1
            await pilot.press("x")
            await until(pilot, lambda: on(pilot, ConfirmScreen), "discard confirmation")
            await pilot.press("y")
            await until(pilot, lambda: "1 quarantined row(s) discarded" in status(quar),
                        "discarded")
            assert await open_count(pool, rec["id"]) == 0

            # back on the detail: the count follows
            await pilot.press("escape")
            await until(pilot, lambda: on(pilot, LineageDetailScreen)
                        and "quarantined rows: 0" in screen_text(detail), "count back to 0")


async def _has(pool: asyncpg.Pool, lineage_id: object, n: int) -> bool:
    return await open_count(pool, lineage_id) == n
