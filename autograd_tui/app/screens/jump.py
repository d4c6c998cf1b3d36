"""The jump dialog (``/``; ``]`` / ``[`` when nothing was typed yet): the event kind or
node to jump to."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Label, Static

from autograd_tui.app.screens.modal import Modal


class JumpScreen(Modal):
    """Dismissed with what ``parse`` makes of the text typed (or None).  A text that
    ``parse`` refuses (it raises ``ValueError``) keeps the dialog open and says why."""

    def __init__(self, parse: Callable[[str], Any], forward: bool = True,
                 value: str = "") -> None:
        super().__init__()
        self.parse = parse
        self.forward = forward
        self.value = value

    def compose(self) -> ComposeResult:
        where = "next" if self.forward else "previous"
        with Vertical(classes="dialog"):
            yield Label(f"Jump to the {where} event of a kind or a node",
                        classes="dialog-title")
            yield Input(value=self.value, id="jump",
                        placeholder="push, #5, MulBackward0, or both: push #5")
            yield Static("enter jumps; then ] jumps to the next one, [ to the previous; "
                         "escape cancels", classes="hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            q = self.parse(event.value)
        except ValueError as e:
            self.notify(str(e), severity="warning")
            return
        self.dismiss(q)
