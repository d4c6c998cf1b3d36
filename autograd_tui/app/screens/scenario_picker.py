"""The scenario picker (``s``): the built-in scenarios, one line each."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from autograd_tui.app.screens.modal import Modal


class ScenarioScreen(Modal):
    """Dismissed with the chosen scenario's name (or None)."""

    def __init__(self, items: list[tuple[str, str]]) -> None:
        super().__init__()
        self.items = items

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Label("Pick a scenario (enter)", classes="dialog-title")
            yield OptionList(*[Option(f"{name:24} {summary}", id=name)
                               for name, summary in self.items], id="scenario-list")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)
