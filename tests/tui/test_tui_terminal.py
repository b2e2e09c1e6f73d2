"""``edgesync tui`` as an operator runs it: the installed command in a real terminal
(tmux, 120x40) against a running server; the screen text is read back with
``tmux capture-pane``. Also the settings screen of a shell without the variables."""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kits.debian_packages import ensure_commands
from kits.e2e_kit import Device, app, eventually, reviews, running_agent, wait_reviews
from kits.review_helpers import (
    MACHINES_DROPPED_RENAMED,
    MACHINES_RETYPED,
    MACHINES_V1,
    MACHINES_V1_DECISION,
    MACHINES_V1_ROWS,
    claim_and_approve,
)
from tui_console import Console, make_console

from edgesync import governance
from edgesync.server import Server

pytestmark = [pytest.mark.e2e, pytest.mark.once, pytest.mark.timeout(150)]


@pytest.fixture(scope="module")
def tmux() -> str:
    """The tmux binary, installed with apt-get when missing (the test cannot run without a
    terminal, so no tmux is a failure, not a skip)."""
    ensure_commands(["tmux"], ["tmux"])
    found = shutil.which("tmux")
    assert found is not None
    return found


def edgesync_command() -> list[str]:
    script = Path(sys.executable).parent / "edgesync"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from edgesync.cli import main; sys.exit(main())"]


class Terminal:
    """One tmux session on a tmux server of its own (``-L``, no config file): a server the
    machine already runs, with its own sizes and options, cannot change this terminal."""

    def __init__(self, tmux: str, name: str) -> None:
        self.tmux = tmux
        self.name = name

    async def run(self, *args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            self.tmux, "-L", self.name, "-f", "/dev/null", *args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        assert proc.returncode == 0, (args, err.decode())
        return out.decode()

    async def screen(self) -> str:
        return await self.run("capture-pane", "-p", "-t", self.name)

    async def keys(self, *keys: str) -> None:
        await self.run("send-keys", "-t", self.name, *keys)

    async def shows(self, *texts: str, limit: float = 30.0) -> str:
        deadline = time.monotonic() + limit
        while True:
            screen = await self.screen()
            if all(t in screen for t in texts):
                return screen
            assert time.monotonic() < deadline, f"{texts} not on screen:\n{screen}"
            await asyncio.sleep(0.2)

    async def gone(self, text: str, limit: float = 30.0) -> None:
        deadline = time.monotonic() + limit
        while text in (screen := await self.screen()):
            assert time.monotonic() < deadline, f"{text!r} still on screen:\n{screen}"
            await asyncio.sleep(0.2)

    async def alive(self) -> bool:
        proc = await asyncio.create_subprocess_exec(
            self.tmux, "-L", self.name, "-f", "/dev/null", "has-session", "-t", self.name,
            stderr=asyncio.subprocess.DEVNULL)
        return await proc.wait() == 0


@pytest.fixture
async def terminal(tmux: str) -> AsyncIterator[Terminal]:
    term = Terminal(tmux, f"edgesync-tui-{uuid.uuid4().hex[:8]}")
    yield term
    if await term.alive():
        await term.run("kill-server")


async def start(term: Terminal, tmp_path: Path, console: Console | None) -> Path:
    """``edgesync tui`` in a 120x40 tmux session: flags for the URL and the token, the
    variables for the organization and project (as an operator's shell would have)."""
    done = tmp_path / f"exit-{term.name}"
    env = ["-e", "TERM=xterm-256color", "-e", "EDGESYNC_ORG_ID=", "-e", "EDGESYNC_PROJECT=",
           "-e", "EDGESYNC_TOKEN=", "-e", "EDGESYNC_API_URL="]
    flags: list[str] = []
    if console is not None:
        s = console.settings
        env = ["-e", "TERM=xterm-256color", "-e", f"EDGESYNC_ORG_ID={s.org_id}",
               "-e", f"EDGESYNC_PROJECT={s.project}"]
        flags = ["--api-url", s.api_url, "--token", str(s.token)]
    # The app starts only once the window is known to be 120x40: an app that read the
    # size of a window still being set up (CI once drew 80x25 in a 120x40 pane) would
    # draw a cut-down table. COLUMNS/LINES from the test's environment are dropped too.
    go = tmp_path / f"go-{term.name}"
    command = " ".join(["env", "-u", "COLUMNS", "-u", "LINES",
                        *map(_quote, edgesync_command()), "tui", *map(_quote, flags)])
    await term.run("new-session", "-d", "-s", term.name, "-x", "120", "-y", "40", *env,
                   f"while [ ! -e {_quote(str(go))} ]; do sleep 0.05; done; "
                   f"{command}; echo $? > {_quote(str(done))}")
    await term.run("resize-window", "-t", term.name, "-x", "120", "-y", "40")
    size = await term.run("display-message", "-p", "-t", term.name,
                          "#{window_width}x#{window_height}")
    assert size.strip() == "120x40", f"tmux window is {size.strip()}, not 120x40"
    go.touch()
    return done


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


async def test_edgesync_tui_in_a_terminal(tui_server: Server, tmp_path: Path, mqtt_url: str,
                                          terminal: Terminal) -> None:
    console = await make_console(tui_server, tmp_path, mqtt_url, "term")
    dev = console.device
    app(dev.db, "CREATE TABLE valves (id INTEGER PRIMARY KEY, state TEXT)")
    async with running_agent(dev):
        app(dev.db, "INSERT INTO valves VALUES (1, 'open')")
        await wait_reviews(console.pool, dev, {"valves"})
        done = await start(terminal, tmp_path, console)
        screen = await terminal.shows("Lineages", dev.scope.device_name, "valves",
                                      "review required", "1 of 1 lineages")
        assert "Traceback" not in screen
        header = screen.splitlines()
        assert any("device" in line and "pause reason" in line for line in header)
        await terminal.keys("?")
        await terminal.shows("Keys: Lineages", "filter", "next page")
        # Esc alone, then the next key: ESC followed at once by a key reads as Alt+key
        await terminal.keys("Escape")
        await terminal.gone("Keys: Lineages")
        await terminal.keys("2")
        await terminal.shows("Schema reviews", "filter: Open", "valves", "queued")
        await terminal.keys("Enter")
        await terminal.shows("Schema review", "Columns and diff", "state", "added")
        await terminal.keys("Escape")
        await terminal.gone("Columns and diff")
        await terminal.keys("1")
        await terminal.shows("Lineages", "review required")
        await terminal.keys("q")
        deadline = time.monotonic() + 30  # hang guard
        while not done.exists() or not done.read_text().strip():
            assert time.monotonic() < deadline, await terminal.screen()
            await asyncio.sleep(0.2)
        assert done.read_text().strip() == "0"


async def test_edgesync_tui_without_settings(tmp_path: Path, terminal: Terminal) -> None:
    await start(terminal, tmp_path, None)
    screen = await terminal.shows("settings missing", "--token / EDGESYNC_TOKEN",
                                  "--org-id / EDGESYNC_ORG_ID")
    assert "Traceback" not in screen
    await terminal.keys("q")


async def test_review_decisions_in_a_terminal(tui_server: Server, tmp_path: Path,
                                              mqtt_url: str, terminal: Terminal) -> None:
    """Issue 27 in a real terminal, a real agent retyping a column (a table rebuild): the
    approve form starts from the carried decisions (a renamed mirror, an ignored column)
    and proposes a name for the retyped column; putting it back on its old column of
    another type is refused on that row with the fix, and ``a`` does nothing; fixed, it
    approves the queued review at once; then a column dropped and one renamed: carried and
    new, the preview names the column it stops writing; the lineage lists both retired."""
    console = await make_console(tui_server, tmp_path, mqtt_url, "t27")
    dev, pool = console.device, console.pool
    app(dev.db, MACHINES_V1)
    async with running_agent(dev):
        app(dev.db, MACHINES_V1_ROWS)
        first = (await wait_reviews(pool, dev, {"machines"}))["machines"]
        await claim_and_approve(pool, first, MACHINES_V1_DECISION)
        app(dev.db, *MACHINES_RETYPED)
        second = (await wait_reviews(pool, dev, {"machines"}))["machines"]
        done = await start(terminal, tmp_path, console)
        await terminal.shows("Lineages", "machines")
        await terminal.keys("2")
        # Open reviews first: the queued one, not the first (approved) one.
        await terminal.shows("Schema reviews", "filter: Open", "machines", "breaking")
        await terminal.keys("Enter")
        await terminal.shows("Schema review", "type changed (REAL → TEXT)", "queued")
        await terminal.keys("a")
        screen = await terminal.shows("machine_state", "temp_c_text", "needs decision",
                                      "carried", "the approval would pass")
        assert "Traceback" not in screen
        # ↑/↓ at once: down to temp_c, and back onto its old double precision column
        await terminal.keys("Down", "Down", "Down", "e")  # id, note, state, temp_c
        await terminal.shows("New name for temp_c")
        await terminal.keys(*["BSpace"] * 5, "Enter")
        screen = await terminal.shows("type conflict", "fix: choose another")
        assert "the approval would pass" not in screen
        await terminal.keys("a")  # off while a column is refused
        await asyncio.sleep(1)
        async with pool.acquire() as conn:
            assert (await governance.get_review(conn, second.id)).status == "queued"
        await terminal.keys("e")
        await terminal.shows("New name for temp_c")
        await terminal.keys("_text", "Enter")
        await terminal.shows("the approval would pass")
        await terminal.gone("type conflict")
        await terminal.keys("a")
        await terminal.shows("approved: the lineage's rows")
        async with pool.acquire() as conn:
            approved = await governance.get_review(conn, second.id)
        assert (approved.status, approved.action_version, approved.claimed_by) == (
            "approved", 3, "admin")
        # note dropped, state renamed to status: carried and new; machine_state retires
        app(dev.db, *MACHINES_DROPPED_RENAMED)
        third = await eventually(lambda: _queued_other(pool, dev, {first.id, second.id}),
                                 what="the third review")
        await terminal.keys("Escape")
        await terminal.gone("Columns and diff")
        await terminal.keys("r")
        await terminal.shows("Schema reviews", "breaking")
        await terminal.keys("Enter")
        await terminal.shows("Schema review", "dropped", "added", "queued")
        await terminal.keys("a")
        await terminal.shows("new", "carried", "no longer written", "machine_state text (from "
                             "state)", "the approval would pass")
        await terminal.keys("a")
        await terminal.shows("approved: the lineage's rows")
        async with pool.acquire() as conn:
            assert (await governance.get_review(conn, third)).status == "approved"
        await terminal.keys("Escape")
        await terminal.gone("Columns and diff")
        await terminal.keys("1")
        await terminal.shows("Lineages", "machines")
        await terminal.keys("Enter")
        await terminal.shows("Retired columns", "temp_c double precision (from temp_c)",
                             "machine_state text (from state)")
        await terminal.keys("q")
        deadline = time.monotonic() + 30
        while not done.exists() or not done.read_text().strip():
            assert time.monotonic() < deadline, await terminal.screen()
            await asyncio.sleep(0.2)


async def _queued_other(pool: object, dev: Device, not_ids: set[uuid.UUID]) -> uuid.UUID | None:
    found = (await reviews(pool, dev, status="queued")).get("machines")  # type: ignore[arg-type]
    return found.id if found is not None and found.id not in not_ids else None
