"""The scenario picker (``s``): the built-in scenarios, one line each, filtered as you
type (by name or summary); enter opens the highlighted one."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from autograd_tui.app.screens.modal import Modal

NAME_WIDTH = 24  # the name column; a summary's wrapped lines start under its own column


def matching(items: list[tuple[str, str]], text: str) -> list[tuple[str, str]]:
    """The items whose name or summary holds every word of ``text`` (any case), a name
    match first: the exact name, then names that start with the text, then names that
    hold it, then the rest (a summary match), each in the given order."""
    words = text.lower().split()
    found = [(name, summary) for name, summary in items
             if all(w in f"{name} {summary}".lower() for w in words)]
    whole = " ".join(words)

    def rank(item: tuple[str, str]) -> int:
        name = item[0].lower()
        if not whole or name == whole:
            return 0
        if name.startswith(whole):
            return 1
        return 2 if all(w in name for w in words) else 3

    return sorted(found, key=rank)  # stable: the given order within a rank


def _row(name: str, summary: str) -> Table:
    """A name and its summary in two columns: the summary's wrapped lines stay under the
    summary column (under the name column a summary's words looked like lesson names)."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=max(NAME_WIDTH, len(name)), no_wrap=True)  # a long name whole
    grid.add_column(ratio=1)
    grid.add_row(name, summary)
    return grid


class ScenarioScreen(Modal):
    """Dismissed with the chosen scenario's name (or None)."""

    # up / down move the highlight while the filter has the focus (the list's own
    # bindings take them when it has the focus)
    BINDINGS = [Binding("up", "move(-1)", show=False), Binding("down", "move(1)", show=False)]

    def __init__(self, items: list[tuple[str, str]]) -> None:
        super().__init__()
        self.items = items

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Label("Pick a scenario: type to filter, enter opens the highlighted one",
                        classes="dialog-title")
            yield Input(placeholder="filter: a name or words of the summary, e.g. deadlock",
                        id="scenario-filter")
            yield OptionList(*self._options(self.items), id="scenario-list")
            yield Static(self._count(len(self.items)), id="scenario-count", classes="hint")

    def on_mount(self) -> None:
        self.query_one(OptionList).highlighted = 0 if self.items else None

    @staticmethod
    def _options(items: list[tuple[str, str]]) -> list[Option]:
        return [Option(_row(name, summary), id=name) for name, summary in items]

    def _count(self, n: int) -> str:
        if n == len(self.items):
            return f"{n} scenarios"
        return f"{n} of {len(self.items)} scenarios match" if n else "no scenario matches"

    def on_input_changed(self, event: Input.Changed) -> None:
        shown = matching(self.items, event.value)
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options(self._options(shown))
        options.highlighted = 0 if shown else None
        self.query_one("#scenario-count", Static).update(self._count(len(shown)))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        options = self.query_one(OptionList)
        if options.highlighted is None:
            self.notify("no scenario matches the filter", severity="warning")
            return
        self.dismiss(options.get_option_at_index(options.highlighted).id)

    def action_move(self, step: int) -> None:
        options = self.query_one(OptionList)
        if options.option_count:
            i = options.highlighted if options.highlighted is not None else -step
            options.highlighted = min(max(i + step, 0), options.option_count - 1)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)
