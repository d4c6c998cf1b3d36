"""A screen of Markdown: the help and a scenario's teaching notes."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Label, Markdown, Static

from autograd_tui.app.screens.modal import Modal


class TextScreen(Modal):
    """Markdown in a scrollable box (help, teaching notes)."""

    BINDINGS = [Binding("escape,q,question_mark,t", "dismiss_none", "Close")]

    def __init__(self, markdown: str, title: str) -> None:
        super().__init__()
        self._markdown = markdown
        self._title = title

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog wide"):
            yield Label(self._title, classes="dialog-title")
            yield Markdown(self._markdown)
            yield Static("escape closes", classes="hint")
