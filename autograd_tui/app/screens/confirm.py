"""A yes/no question (``y`` or enter: yes; ``n`` or escape: no), e.g. before an export
replaces a file."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Label, Static

from autograd_tui.app.screens.modal import Modal


class ConfirmScreen(Modal):
    """Dismissed with True (yes) or False (no, escape)."""

    BINDINGS = [Binding("y", "answer(True)", "Yes"), Binding("n", "answer(False)", "No")]

    def __init__(self, question: str, yes: str = "Replace") -> None:
        super().__init__()
        self.question, self.yes = question, yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question, classes="dialog-title", markup=False)
            with Horizontal(classes="buttons"):
                yield Button(f"{self.yes} (y)", id="confirm-yes", variant="warning")
                yield Button("Cancel (n)", id="confirm-no", variant="primary")
            yield Static("y to go ahead, n or escape to cancel", classes="hint")

    def on_mount(self) -> None:
        self.query_one("#confirm-no", Button).focus()  # enter alone does not replace

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm-yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

    def action_dismiss_none(self) -> None:
        self.dismiss(False)
