"""``?``: an overlay listing the keys of the screen it was opened on."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

__all__ = ["HelpScreen"]

# Keys every screen has (Textual's own cursor keys are not in BINDINGS of ours).
_GLOBAL = [("↑/↓", "move"), ("Enter", "open / select"), ("Esc", "back"),
           ("?", "this help"), ("q", "quit")]


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,enter", "dismiss", "close")]

    def __init__(self, screen_title: str, keys: list[tuple[str, str]]) -> None:
        super().__init__()
        self.screen_title = screen_title
        self.keys = keys

    def compose(self) -> ComposeResult:
        body = Text()
        body.append(f"Keys: {self.screen_title}\n\n", style="bold")
        seen = set()
        for key, what in [*self.keys, *_GLOBAL]:
            # "esc" and "Esc" are one key, "d" and "D" two.
            name = key if len(key) == 1 else key.lower()
            if name in seen:
                continue
            seen.add(name)
            body.append(f"  {key:<8}", style="bold cyan")
            body.append(f"{what}\n")
        body.append("\nEsc or ? closes.")
        with Vertical(id="help"):
            yield Static(body, id="help-text")

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)

    @property
    def plain(self) -> str:
        found = self.query("#help-text")  # empty until the screen has composed
        return str(found.first(Static).render()) if found else ""
