"""The export dialog (``e``): the path of a Graphviz snapshot of the shown state."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Label, Static

from autograd_tui.app.screens.modal import Modal


class ExportScreen(Modal):
    """Dismissed with the path typed (or None); the format follows its suffix."""

    def __init__(self, default: str) -> None:
        super().__init__()
        self.default = default

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Export the shown state (.dot, .svg, .png or .pdf), or the "
                        "events up to it as a Chrome trace (.json)", classes="dialog-title")
            yield Input(value=self.default, id="export-path")
            yield Static("enter to write, escape to cancel", classes="hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.dismiss(event.value.strip())
