"""The console's own screens when it cannot work: settings missing, the API unreachable
(with a retry), a token the API refuses; and the small pure parts of its screens."""

from __future__ import annotations

import asyncio
import socket
import uuid

from textual.widgets import DataTable, Input
from tui_console import make_console
from tui_pilot import composed, on, open_row, rows, screen_text, until

from edgesync.server import Server
from edgesync.tui import EdgesyncTui, TuiSettings
from edgesync.tui._approve import preview_lines
from edgesync.tui._confirm import AskScreen
from edgesync.tui._help import HelpScreen
from edgesync.tui._lineage_detail import replay_progress
from edgesync.tui._lineages import LineagesScreen
from edgesync.tui._policy import PolicyScreen, policy_value
from edgesync.tui._problem import ProblemScreen
from edgesync.tui._review_detail import column_changes
from edgesync.tui._rows import decoded_rows


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_settings_missing_is_a_screen_not_a_traceback() -> None:
    tui = EdgesyncTui(TuiSettings(token="esk_x"))
    async with tui.run_test(size=(120, 40)) as pilot:
        problem = await until(pilot, lambda: composed(pilot, ProblemScreen), "settings screen")
        assert "settings missing" in problem.plain
        assert "--org-id / EDGESYNC_ORG_ID" in problem.plain
        assert "--project / EDGESYNC_PROJECT" in problem.plain
        assert "--token" not in problem.plain.split("Same settings")[0]
        await pilot.press("r")  # nothing to retry
        assert on(pilot, ProblemScreen) is problem
        await pilot.press("q")
    assert tui.return_code == 0


async def test_unreachable_api_then_retry(tui_server: Server, tmp_path, mqtt_url: str) -> None:
    console = await make_console(tui_server, tmp_path, mqtt_url, "set")
    port = _closed_port()
    s = console.settings
    tui = EdgesyncTui(TuiSettings(f"http://127.0.0.1:{port}", s.token, s.org_id, s.project))
    async with tui.run_test(size=(120, 40)) as pilot:
        problem = await until(pilot, lambda: composed(pilot, ProblemScreen), "unreachable screen")
        assert "Cannot reach the edgesync API" in problem.plain
        assert f"http://127.0.0.1:{port}" in problem.plain and "r tries again" in problem.plain
        # the operator fixes nothing: r shows the same screen again
        await pilot.press("r")
        await until(pilot, lambda: composed(pilot, ProblemScreen), "still unreachable")

    # a token the API does not know
    tui = EdgesyncTui(TuiSettings(s.api_url, "esk_" + uuid.uuid4().hex, s.org_id, s.project))
    async with tui.run_test(size=(120, 40)) as pilot:
        problem = await until(pilot, lambda: composed(pilot, ProblemScreen), "refused screen")
        assert "refused the token" in problem.plain and "UNAUTHENTICATED" in problem.plain

    # an organization that is not the token's: the setup screen says whose it is
    tui = EdgesyncTui(TuiSettings(s.api_url, s.token, str(uuid.uuid4()), s.project))
    async with tui.run_test(size=(120, 40)) as pilot:
        problem = await until(pilot, lambda: composed(pilot, ProblemScreen), "org screen")
        assert "another organization" in problem.plain and "ORG_MISMATCH" in problem.plain
        assert str(s.org_id) in problem.plain

    # a project named by a name no project has: the setup screen lists the projects there
    # are, before any screen that would need one (issue 27)
    tui = EdgesyncTui(TuiSettings(s.api_url, s.token, s.org_id, "nosuch"))
    async with tui.run_test(size=(120, 40)) as pilot:
        problem = await until(pilot, lambda: composed(pilot, ProblemScreen), "project screen")
        assert "PROJECT_NOT_FOUND" in problem.plain and "'nosuch'" in problem.plain
        assert "there are: e2e-" in problem.plain
        assert not [sc for sc in pilot.app.screen_stack if isinstance(sc, LineagesScreen)]

    # the right settings: the Lineages screen, empty, and its help overlay; the header
    # names the project (it showed its id)
    tui = console.app()
    async with tui.run_test(size=(120, 40)) as pilot:
        lineages = await until(pilot, lambda: on(pilot, LineagesScreen), "lineages")
        assert " · project e2e-set" in tui.sub_title and s.project not in tui.sub_title
        await until(pilot, lambda: "0 of 0 lineages" in screen_text(lineages), "loaded")
        assert lineages.query_one("#main-table", DataTable).row_count == 0
        await pilot.press("question_mark")
        help_ = await until(pilot, lambda: composed(pilot, HelpScreen), "help")
        assert "/       filter" in help_.plain and "?       help" in help_.plain
        assert help_.plain.lower().count("esc     back") == 1
        await pilot.press("escape")

        # the policy screen: a change, a value the API refuses, a toggle, a reset
        await until(pilot, lambda: on(pilot, LineagesScreen), "help closed")
        await pilot.press("4")
        policy = await until(pilot, lambda: on(pilot, PolicyScreen), "policy screen")
        ptable = policy.query_one("#main-table", DataTable)
        await until(pilot, lambda: "max_pending_rows_per_lineage" in rows(ptable), "policy")
        assert rows(ptable)["max_pending_rows_per_lineage"][1] == "100000"

        async def change(field: str, *keys: str) -> None:
            await open_row(pilot, ptable, field)  # Enter asks for the value
            ask = await until(pilot, lambda: on(pilot, AskScreen), f"{field} prompt")
            ask.query_one(Input).value = ""
            await pilot.press(*keys, "enter")
            await until(pilot, lambda: on(pilot, PolicyScreen), "back on the policy")

        await change("max_pending_rows_per_lineage", *"50000")
        await until(pilot, lambda: rows(ptable)["max_pending_rows_per_lineage"][1] == "50000",
                    "changed")
        assert "max_pending_rows_per_lineage = 50000" in policy.status_text
        await change("resume_threshold_percent", *"150")
        await until(pilot, lambda: "VALIDATION_FAILED" in policy.status_text, "refused")
        assert "resume_threshold_percent" in policy.status_text
        assert rows(ptable)["resume_threshold_percent"][1] == "80"
        await open_row(pilot, ptable, "allow_additive_continue", enter=False)
        await pilot.press("t")
        await until(pilot, lambda: rows(ptable)["allow_additive_continue"][1] == "true",
                    "toggled")
        await change("max_pending_rows_per_lineage", *"default")
        await until(pilot, lambda: rows(ptable)["max_pending_rows_per_lineage"][1] == "100000",
                    "back to the default")
        assert (await asyncio.to_thread(tui.api.policy))["allow_additive_continue"] is True


def test_decoded_rows_spread_row_batches_and_deletes() -> None:
    columns, flat = decoded_rows([
        {"staged_id": 1, "staging_reason": "schema_review", "schema_hash": "h", "commit_seq": 1,
         "op": "insert", "pk": {"id": 1}, "row": {"id": 1, "mode": "eco"}},
        {"staged_id": 1, "staging_reason": "schema_review", "schema_hash": "h", "commit_seq": 2,
         "op": "delete", "pk": {"id": 2}, "row": None},
        {"staged_id": 2, "staging_reason": "schema_review", "schema_hash": "h",
         "event_ts": "2026-01-01T00:00:00Z", "temp": 20.5}])
    assert columns == ["staged_id", "staging_reason", "commit_seq", "op", "id", "mode",
                       "event_ts", "temp"]
    assert [r.get("id") for r in flat] == [1, 2, None]
    assert flat[2]["temp"] == 20.5


def test_column_changes_and_preview_lines() -> None:
    review = {"schema_columns": {"columns": [
        {"name": "id", "decl_type_affinity": "INTEGER", "pk_ordinal": 1},
        {"name": "mode", "decl_type_affinity": "TEXT", "pk_ordinal": 0},
        {"name": "extra", "decl_type_affinity": "BLOB", "pk_ordinal": 0}]},
        "diff": {"added": ["extra"], "dropped": ["old"], "type_changed": ["mode"]}}
    assert column_changes(review) == [("id", "unchanged"), ("mode", "type changed"),
                                      ("extra", "added"), ("old", "dropped")]
    assert column_changes({"schema_columns": review["schema_columns"]}) == [
        ("id", "-"), ("mode", "-"), ("extra", "-")]  # a registry review: no device diff
    lines = preview_lines({
        "target_table": "edge_state_x_t", "pipeline": "rows",
        "columns": [{"target_column_name": "id", "pg_type": "bigint", "primary_key": True},
                    {"target_column_name": "hvac", "pg_type": "jsonb", "primary_key": False}],
        "data_points": [{"source_column_name": "sp", "device_data_point_id": None,
                         "data_point_name": "setpoint"}],
        "ignored": [], "deferred": ["extra"]})
    assert lines == ["target table: edge_state_x_t (rows)",
                     "target columns: id bigint primary key, hvac jsonb",
                     "data points: sp → data point setpoint",
                     "deferred (the lineage stays paused until decided): extra"]


def test_replay_progress() -> None:
    assert replay_progress({"replay": {"intents": [], "staged_rows": 7}}) == (
        0, 7, "no replay yet")
    pending = {"replay": {"staged_rows": 30, "intents": [
        {"status": "pending", "rows_replayed": 70, "last_error": None}]}}
    assert replay_progress(pending) == (70, 100, "pending")
    done = {"replay": {"staged_rows": 0, "intents": [
        {"status": "done", "rows_replayed": 100, "last_error": None}]}}
    assert replay_progress(done) == (100, 100, "done")


def test_policy_values_read_like_the_cli() -> None:
    assert [policy_value(t) for t in ("50000", "true", "fleet", '"none"', "default", " ")] == [
        50000, True, "fleet", "none", None, None]
