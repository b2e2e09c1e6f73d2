"""What every console screen shares: API calls off the event loop, a status line for
their outcome, and the keys back (Esc) and refresh (r).

The client is the operator CLI's synchronous ``ApiClient``; each call runs in a thread
(``asyncio.to_thread``) so the screen stays responsive while the API answers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Header, Static

from edgesync.client import ApiClientError, ProjectApi
from edgesync.errors import ApiErrorCode

if TYPE_CHECKING:
    from edgesync.tui._app import EdgesyncTui

__all__ = ["SETUP_CODES", "ApiScreen"]

T = TypeVar("T")

# Answers that mean the console cannot work at all (wrong token, org or project): shown
# as a full screen, like missing settings, rather than as one failed action.
SETUP_CODES = frozenset({ApiErrorCode.CONNECTION_FAILED, ApiErrorCode.UNAUTHENTICATED,
                         ApiErrorCode.PROJECT_NOT_FOUND, ApiErrorCode.ORG_ID_REQUIRED,
                         ApiErrorCode.INVALID_ORG_ID, ApiErrorCode.ORG_MISMATCH,
                         ApiErrorCode.PROJECT_AMBIGUOUS})


class ApiScreen(Screen[None]):
    # The table, not a hidden search box, takes the keys when a screen opens.
    AUTO_FOCUS = "DataTable"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "back"),
        # Listed by ? (help), not in the footer: on an 80-column terminal a detail screen's
        # keys pushed "? help" itself off the footer ("? he▏").
        Binding("r", "refresh", "refresh", show=False),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        yield from self.body()
        yield Static("", id="status", markup=False)
        yield Footer(compact=True, show_command_palette=False)

    def body(self) -> Iterable[Widget]:
        return ()

    @property
    def tui(self) -> EdgesyncTui:
        # The app is always the console (a screen runs in no other); named for mypy only,
        # so that no screen imports the console back at run time.
        return cast("EdgesyncTui", self.app)

    @property
    def api(self) -> ProjectApi:
        return self.tui.api

    def on_mount(self) -> None:
        self.action_refresh()

    def action_refresh(self) -> None:
        self.spawn(self.reload, group="reload", exclusive=True)

    def spawn(self, work: Callable[[], Awaitable[object]], *, group: str = "action",
              exclusive: bool = False) -> None:
        """Run ``work`` as a worker of this screen (it ends with the screen). A callable,
        not a coroutine: an exclusive worker replaced before it starts never awaits it."""
        self.run_worker(cast(Any, work), group=group, exclusive=exclusive)

    async def reload(self) -> None:
        """Read what the screen shows from the API."""

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:  # the stack's bottom is Textual's default screen
            self.app.pop_screen()

    def say(self, message: str, *, error: bool = False) -> None:
        # A worker of a screen the operator just left may finish (its API call was in a
        # thread) after the screen is gone: there is no status line to say it on then.
        for line in self.query("#status").results(Static):
            line.update(Text(message, style="bold red" if error else "green"))

    @property
    def status_text(self) -> str:
        return str(self.query_one("#status", Static).render())

    async def call(self, fn: Callable[..., T], *args: Any,
                   raise_codes: frozenset[str] = frozenset(), **kwargs: Any) -> T | None:
        """``fn(*args, **kwargs)`` in a thread. An API error is shown (on the status line,
        or as a full screen when the console cannot work at all) and gives None; codes in
        ``raise_codes`` are raised for the caller to handle."""
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except ApiClientError as exc:
            if exc.code in raise_codes:
                raise
            if exc.code in SETUP_CODES:
                self.tui.show_problem(exc)
            else:
                self.say(str(exc), error=True)
            return None
