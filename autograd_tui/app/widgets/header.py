"""The title bar: the app's name, the scenario, live or replay, the shown event."""

from __future__ import annotations

from rich.text import Text

from autograd_tui.app.widgets.text_line import TextLine


class Header(TextLine):
    """One centred line.  Not Textual's ``Header``: its title is re-laid out (the whole
    screen) at each change, and the shown event changes at each step."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(center=True, id=id, classes=classes)

    def show(self, title: str, sub_title: str) -> None:
        self.update(Text.assemble((title, "bold"), " — ", sub_title))
