"""The screen shown instead of a traceback when the console cannot work: settings missing,
the API unreachable, or the token, organization or project refused."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer, Static

__all__ = ["ProblemScreen"]


class ProblemScreen(Screen[None]):
    BINDINGS = [Binding("r", "app.retry", "retry")]

    def __init__(self, title: str, lines: list[str], *, can_retry: bool) -> None:
        super().__init__()
        self.title_text = title
        self.lines = lines
        self.can_retry = can_retry

    def compose(self) -> ComposeResult:
        body = Text()
        body.append(self.title_text + "\n\n", style="bold red")
        for line in self.lines:
            body.append(f"  {line}\n")
        body.append("\nSame settings as the operator CLI (docs/cli.md): flags --api-url, "
                    "--token, --org-id, --project or the variables EDGESYNC_API_URL, "
                    "EDGESYNC_TOKEN, EDGESYNC_ORG_ID, EDGESYNC_PROJECT.\n")
        body.append("q quits" + (", r tries again." if self.can_retry else "."))
        with Vertical(id="problem"):
            yield Static(body, id="problem-text")
        yield Footer()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "retry":
            return self.can_retry
        return True

    @property
    def plain(self) -> str:
        found = self.query("#problem-text")  # empty until the screen has composed
        return str(found.first(Static).render()) if found else ""
