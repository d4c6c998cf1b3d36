"""The go-to dialog (``g``): an event index to show."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Label, Static

from autograd_tui.app.screens.modal import Modal


class GotoScreen(Modal):
    """Dismissed with an event index in 0..count (or None)."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.count = count

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(f"Go to event (0..{self.count})", classes="dialog-title")
            yield Input(placeholder="event index", id="goto", type="integer")
            yield Static("enter to go, escape to cancel", classes="hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            i = int(event.value)
        except ValueError:
            self.notify("type a whole number", severity="warning")
            return
        if not 0 <= i <= self.count:
            self.notify(f"{i} is outside 0..{self.count}", severity="warning")
            return
        self.dismiss(i)
