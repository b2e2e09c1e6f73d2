"""Modal questions: yes/no (a destructive action, a reload after a conflict) and a line of
text (a rejection reason, a column name)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

__all__ = ["AskScreen", "ConfirmScreen"]


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS = [Binding("y", "answer(True)", "yes"), Binding("n,escape", "answer(False)", "no")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text(self.question), id="question")
            yield Static(Text("y yes · n no", style="bold"))

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class AskScreen(ModalScreen[str | None]):
    """One line of text; Enter sends it (empty gives ""), Esc cancels (None)."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, question: str, value: str = "", placeholder: str = "") -> None:
        super().__init__()
        self.question = question
        self.value = value
        self.placeholder = placeholder

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text(self.question), id="question")
            yield Input(value=self.value, placeholder=self.placeholder, id="answer")
            yield Static(Text("Enter sends · Esc cancels", style="bold"))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)
