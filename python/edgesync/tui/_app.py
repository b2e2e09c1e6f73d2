"""The console application: connects with the operator CLI's settings and opens on the
Lineages screen; a clear screen instead when it cannot work."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from collections import deque
from typing import Any

from textual.app import App
from textual.binding import Binding

from edgesync.client import ApiClient, ApiClientError, ProjectApi
from edgesync.errors import ApiErrorCode
from edgesync.tui import (
    _approve,
    _devices,
    _events,
    _lineage_detail,
    _lineages,
    _policy,
    _quarantine,
    _registry,
    _review_detail,
    _reviews,
    _rows,
)
from edgesync.tui._base import ApiScreen
from edgesync.tui._feed import EventFeed
from edgesync.tui._help import HelpScreen
from edgesync.tui._problem import ProblemScreen
from edgesync.tui._screens import ScreenKind, new_screen
from edgesync.tui._settings import TuiSettings

__all__ = ["EdgesyncTui", "run_tui"]

# Every screen module, imported here once: each registers its screen under its kind as it
# is imported, and screens open one another by kind (``_screens``), not by importing.
SCREEN_MODULES = (_approve, _devices, _events, _lineage_detail, _lineages, _policy,
                  _quarantine, _registry, _review_detail, _reviews, _rows)

_CSS = """
#status { height: auto; max-height: 6; padding: 0 1; }
.head { padding: 0 1; background: $boost; }
.section { padding: 1 1 0 1; text-style: bold; }
.block { padding: 0 1; }
DataTable { height: auto; max-height: 16; }
#main-table { height: 1fr; max-height: 100%; }
#filter { dock: top; display: none; }
#filter.shown { display: block; }
#problem { padding: 2 4; }
ModalScreen { align: center middle; }
#help, .dialog { width: 80; height: auto; max-height: 90%; border: thick $accent;
                 background: $surface; padding: 1 2; }
ProgressBar { padding: 0 1; }
"""

_PROBLEM_TITLES: dict[str, str] = {
    ApiErrorCode.CONNECTION_FAILED: "Cannot reach the edgesync API",
    ApiErrorCode.UNAUTHENTICATED:
        "The API refused the token (missing, unknown, expired or revoked)",
    ApiErrorCode.PROJECT_NOT_FOUND:
        "Project not found, or not visible to this token in this organization",
    ApiErrorCode.ORG_ID_REQUIRED: "The organization id is missing",
    ApiErrorCode.INVALID_ORG_ID: "The organization id is not a valid id",
    ApiErrorCode.ORG_MISMATCH: "The token belongs to another organization",
    ApiErrorCode.PROJECT_AMBIGUOUS: "The project name matches several projects",
}


class EdgesyncTui(App[int]):
    TITLE = "edgesync"
    CSS = _CSS
    BINDINGS = [
        Binding("q", "quit", "quit"),
        Binding("question_mark", "help", "help"),
        Binding("1", "lineages", "lineages", show=False),
        Binding("2", "reviews", "reviews", show=False),
        Binding("3", "events", "events", show=False),
        Binding("4", "policy", "policy", show=False),
        Binding("5", "registry", "registry", show=False),
        Binding("6", "devices", "devices", show=False),
    ]

    def __init__(self, settings: TuiSettings, *, client: ApiClient | None = None) -> None:
        super().__init__()
        self.settings = settings
        self._client = client
        self._api: ProjectApi | None = None
        self.events: deque[dict[str, Any]] = deque(maxlen=500)
        self.feed: EventFeed | None = None
        self.feed_state = "not connected"
        self._loop: asyncio.AbstractEventLoop | None = None
        self.sub_title = f"{settings.api_url} · project {settings.project or '?'}"

    @property
    def api(self) -> ProjectApi:
        assert self._api is not None, "no API: the settings screen is shown"
        return self._api

    async def on_mount(self) -> None:
        problems = self.settings.problems()
        if problems:
            self.push_screen(ProblemScreen("edgesync tui cannot start: settings missing",
                                           problems, can_retry=False))
            return
        s = self.settings
        assert s.token is not None and s.org_id is not None and s.project is not None
        self._client = self._client or ApiClient(s.api_url, token=s.token, org_id=s.org_id,
                                                 timeout=15.0)
        try:  # a project named by its name or topic slug: its id, before any screen
            project, name = await asyncio.to_thread(self._project, s.project)
        except ApiClientError as exc:
            title = _PROBLEM_TITLES.get(exc.code, "The API refused the console")
            self.push_screen(ProblemScreen(title, [f"API: {s.api_url}", str(exc)],
                                           can_retry=False))
            return
        self._api = self._client.project(project)
        self.sub_title = f"{s.api_url} · project {name or project}"
        self._loop = asyncio.get_running_loop()
        self.feed = EventFeed(self._api, self._from_feed, self._feed_failed)
        self.feed.start()
        self.push_screen(new_screen(ScreenKind.LINEAGES))

    def _project(self, ref: str) -> tuple[str, str | None]:
        """The project's id and, for the header, its name (the id alone said little)."""
        assert self._client is not None
        project = self._client.resolve_project(ref)
        try:
            names = {str(p["id"]): str(p["name"]) for p in self._client.projects()}
        except ApiClientError:  # the first screen says what is wrong, with its retry
            return project, None
        return project, names.get(project)

    def on_unmount(self) -> None:
        if self.feed is not None:
            self.feed.stop()
        if self._client is not None:
            self._client.close()

    # The feed's thread hands events over to the app's loop without waiting for it.
    def _from_feed(self, event: dict[str, Any]) -> None:
        self._soon(self._event_arrived, event)

    def _feed_failed(self, exc: ApiClientError) -> None:
        self._soon(self._set_feed_state, f"interrupted ({exc.code}), reconnecting")

    def _soon(self, fn: Any, arg: Any) -> None:
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the console has closed
                self._loop.call_soon_threadsafe(fn, arg)

    def _set_feed_state(self, state: str) -> None:
        self.feed_state = state

    def _event_arrived(self, event: dict[str, Any]) -> None:
        self.feed_state = "live"
        self.events.append(event)
        handler = getattr(self.screen, "feed_event", None)
        if handler is not None:
            handler(event)

    def show_problem(self, exc: ApiClientError) -> None:
        if isinstance(self.screen, ProblemScreen):
            return
        title = _PROBLEM_TITLES.get(exc.code, "The API refused the console")
        lines = [f"API: {self.settings.api_url}", str(exc)]
        self.push_screen(ProblemScreen(title, lines, can_retry=True))

    def action_retry(self) -> None:
        if isinstance(self.screen, ProblemScreen) and self.screen.can_retry:
            self.pop_screen()
            if isinstance(self.screen, ApiScreen):
                self.screen.action_refresh()

    def action_help(self) -> None:
        screen = self.screen
        if isinstance(screen, HelpScreen):
            return
        keys = []
        for key, active in screen.active_bindings.items():
            binding = active.binding
            # Every key, the footer's and those it leaves out for room (r, 1 to 6).
            if binding.description and active.enabled:
                keys.append((self.get_key_display(binding) or key, binding.description))
        self.push_screen(HelpScreen(screen.title or type(screen).__name__, keys))

    def _root(self) -> None:
        while len(self.screen_stack) > 2:
            self.pop_screen()

    def action_lineages(self) -> None:
        if self._api is not None:
            self._root()

    def action_reviews(self) -> None:
        self._open(ScreenKind.REVIEWS)


    def action_events(self) -> None:
        self._open(ScreenKind.EVENTS)

    def action_policy(self) -> None:
        self._open(ScreenKind.POLICY)

    def action_registry(self) -> None:
        self._open(ScreenKind.REGISTRY)

    def action_devices(self) -> None:
        self._open(ScreenKind.DEVICES)

    def _open(self, kind: ScreenKind) -> None:
        """A top-level screen, on the Lineages screen (Esc goes back there)."""
        if self._api is not None:
            self._root()
            self.push_screen(new_screen(kind))


def run_tui(args: argparse.Namespace) -> int:
    """``edgesync tui``: run the console until the operator quits."""
    from textual.logging import TextualHandler

    # Log lines written to the terminal would tear the screen: send them to Textual's log
    # (``textual console``) while the console runs.
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers = [TextualHandler()]
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        app = EdgesyncTui(TuiSettings.from_args(args))
        app.run()
    finally:
        root.handlers = saved
    return app.return_code or 0
