"""The side column's panes, and the tab strip that switches them in a short terminal.

Below ``TALL_HEIGHT`` rows the side column has no room for the threads, the ready
queues, not_ready and the GraphTasks at once (at 80x24 the last two were pushed off
the screen): it then shows one of them, chosen with ``w`` (the next) or the pane's
own key, and this strip above it says which, like tabs."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import events
from textual.message import Message

from autograd_tui.app.widgets.text_line import TextLine

TALL_HEIGHT = 34  # rows: from here up the side panes are stacked, all shown


@dataclass(frozen=True)
class Pane:
    """A side pane: ``name`` is the argument of ``show_pane``, ``key`` shows it."""

    name: str
    label: str  # its tab
    short: str  # its tab where the labels do not fit
    key: str
    id: str  # the widget's id


PANES = (
    Pane("threads", "threads", "threads", "T", "threads-pane"),
    Pane("queues", "ready queues", "queues", "Q", "queues"),
    Pane("not_ready", "not_ready", "not_ready", "R", "not-ready"),  # N: back a node
    Pane("graph_tasks", "GraphTasks", "tasks", "G", "graph-tasks"),
)
PANE_NAMES = tuple(p.name for p in PANES)


class PaneTabs(TextLine):
    """One line of tabs, the shown pane's in reverse video; a click on a tab shows it."""

    @dataclass
    class Chosen(Message):
        """A tab was clicked."""

        name: str

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.current = PANES[0].name
        self._spans: list[tuple[int, int, str]] = []  # (start, end, name) of each tab

    def on_resize(self) -> None:
        self.show(self.current)  # the labels that fit this width

    def show(self, current: str) -> None:
        self.current = current
        width = self.size.width
        full = sum(len(p.label) + 2 for p in PANES)
        text, self._spans = Text(), []
        for p in PANES:
            label = f" {p.label if not width or full <= width else p.short} "
            start = text.cell_len
            text.append(label, style="bold reverse" if p.name == current else "dim")
            self._spans.append((start, text.cell_len, p.name))
        self.update(text)

    def on_click(self, event: events.Click) -> None:
        for start, end, name in self._spans:
            if start <= event.x < end:
                self.post_message(self.Chosen(name))
                return
