"""The event log: every event up to the newest, one row each, the shown one selected."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from textual import on
from textual.message import Message

from autograd_tui.app.widgets.line_table import LineTable
from autograd_tui.app.widgets.rows import Row, cells
from autograd_tui.words import KIND_STYLE, event_line

SAMPLE = 500  # a recording's column width: from its first and last SAMPLE events


def log_row(e: Any, names: dict[int, str]) -> Row:
    """An event's row: its number, then its thread, GraphTask and words in its kind's
    colour."""
    return cells(str(e.seq), (event_line(e, names), KIND_STYLE.get(e.kind, "")))


class EventLog(LineTable):
    """A live run's rows are appended as events come; a recording's are made as they
    scroll into view (it may hold a million events)."""

    BORDER_TITLE = "events"

    @dataclass
    class EventChosen(Message):
        """A row was clicked (or ``enter`` pressed on it): show the state at event k."""

        k: int

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(("seq", "event"), zebra=True, id=id, classes=classes)

    def show_recording(self, count: int, event: Callable[[int], Any],
                       names: dict[int, str]) -> None:
        """Show the ``count`` events ``event(i)`` (0-based) of a recording."""

        def fetch(i: int) -> Row:
            return log_row(event(i), names)

        width = max(len("seq"), len(str(event(count - 1).seq)))
        sample = [fetch(i)[1][0] for i in (*range(min(count, SAMPLE)),
                                           *range(max(count - SAMPLE, 0), count))]
        self.set_lazy_rows(count, fetch, [width, max(map(len, sample))])

    def append_events(self, events: Sequence[Any], names: dict[int, str]) -> None:
        self.append_rows([log_row(e, names) for e in events])

    def select_event(self, k: int) -> None:
        """Put the cursor on event k's row (k from 1; at 0 there is none)."""
        if 1 <= k <= self.row_count:
            self.move_cursor(k - 1)

    @on(LineTable.Selected)
    def _chosen(self, event: LineTable.Selected) -> None:
        event.stop()
        self.post_message(self.EventChosen(event.index + 1))
