"""The Textual app. For now a placeholder until the visual debugger lands."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Header, Static

PLACEHOLDER_TEXT = (
    "autograd-tui — the engine is ready; the visual debugger is coming. Press q to quit."
)

HELP_TEXT = "q: quit    ?: this help"


class AutogradApp(App[None]):
    """Placeholder app: a header, an explanation, and a footer with the key bindings."""

    TITLE = "autograd-tui"
    CSS_PATH = "app.tcss"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "show_help", "Help", key_display="?"),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(PLACEHOLDER_TEXT, id="placeholder")
        yield Footer()

    def action_show_help(self) -> None:
        self.notify(HELP_TEXT, title="Help")
