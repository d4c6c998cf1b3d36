"""``o``: what the program wrote to stdout and stderr while the app ran, as text."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Label, Static

from autograd_tui.app.program_output import ProgramOutput
from autograd_tui.app.screens.modal import Modal
from autograd_tui.words import plain


class OutputScreen(Modal):
    """The program's output lines in a scrollable box (stderr's in the error colour)."""

    BINDINGS = [Binding("escape,q,o", "dismiss_none", "Close")]

    def __init__(self, output: ProgramOutput) -> None:
        super().__init__()
        self._lines = output.lines()

    def compose(self) -> ComposeResult:
        text = Text()
        for stream, line in self._lines:  # text, never markup: a program's output is data
            text.append(plain(line) + "\n", style="red" if stream == "stderr" else "")
        with VerticalScroll(classes="dialog wide"):
            yield Label(f"the program's output ({len(self._lines)} lines)",
                        classes="dialog-title")
            yield Static(text if self._lines else Text("nothing written yet"), id="output")
            yield Static("escape closes", classes="hint")
