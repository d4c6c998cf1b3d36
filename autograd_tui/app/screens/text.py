"""A screen of Markdown: the help and a scenario's teaching notes."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Label, Markdown, Static

from autograd_tui.app.screens.modal import Modal
from autograd_tui.words import plain


class TextScreen(Modal):
    """Markdown in a scrollable box (help, teaching notes)."""

    BINDINGS = [Binding("escape,q,question_mark,t", "dismiss_none", "Close")]

    def __init__(self, markdown: str, title: str) -> None:
        super().__init__()
        self._markdown = markdown
        self._title = title

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog wide"):
            # Text, not markup: the title names the scenario, which a recording gives
            yield Label(Text(plain(self._title)), classes="dialog-title")
            yield Markdown(self._markdown)
            yield Static("escape closes", classes="hint")
