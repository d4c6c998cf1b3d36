"""The threads pane: one row per engine thread (its number for the 1-9 keys, its depth,
its node) and its state wrapped below; the threads of a deadlock's cycle in red."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical

from autograd_tui.app.widgets.line_table import GAP, LineTable
from autograd_tui.app.widgets.rows import Row, cells


class ThreadsTable(LineTable):
    """The threads pane: ``#  thread  depth  node`` on a row's first line, and the
    thread's state below it, wrapped to the pane's width: at 120 columns a state such
    as "waiting on lock GraphTask 1 mutex (held by cuda:1)" does not fit in a column
    beside the others.  A node name too long for the line ends in "…": the pane never
    scrolls sideways.

    Rows are ``(#, thread, depth, node, state)``."""

    INDENT = 3

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        # grow_only: a state that wraps on two lines, then one, would re-lay out the screen
        super().__init__(("#", "thread", "depth", "node"), grow_only=True, id=id,
                         classes=classes)

    def _state_lines(self, row: Row, width: int) -> list[str]:
        state = row[4][0] if len(row) > 4 else ""
        if not state:
            return []
        return textwrap.wrap(state, max(width - self.INDENT, 10)) or [state]

    def row_height(self, row: Row, width: int) -> int:
        return 1 + len(self._state_lines(row, width))

    def row_lines(self, row: Row, width: int) -> list[Text]:
        first = super().row_lines(row[:4], width)[0]
        if width and first.cell_len > width:
            first.truncate(width, overflow="ellipsis")
        style = row[4][1] if len(row) > 4 else ""
        return [first] + [Text(" " * self.INDENT + line, style=style, no_wrap=True, end="")
                          for line in self._state_lines(row, width)]

    def _content_width(self) -> int:
        # the node is cut to the line and the state wraps: neither widens the table
        widths = self._widths[:3]
        return sum(widths) + GAP * len(widths) + len("node")


class ThreadsPane(Vertical):
    """The bordered pane around a ``ThreadsTable`` (``#threads``)."""

    BORDER_TITLE = "threads (1-9 step, p pause)"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._shown: tuple[object, ...] | None = None  # what the table shows

    def compose(self) -> ComposeResult:
        yield ThreadsTable(id="threads")

    @property
    def table(self) -> ThreadsTable:
        return self.query_one("#threads", ThreadsTable)

    def clear(self) -> None:
        self._shown = None
        self.table.clear()

    def show(self, rows: Sequence[tuple[str, str, str, str]], cycle: set[str]) -> None:
        """``rows``: (thread, state, node, depth) per thread (``render.threads_rows``);
        ``cycle``: the threads of a deadlock's wait-for cycle."""
        key = (tuple(rows), frozenset(cycle))
        if key == self._shown:
            return
        self._shown = key
        table_rows: list[Row] = []
        for i, (name, what, node, depth) in enumerate(rows, 1):
            style = "bold red" if name in cycle else (
                "yellow" if "paused" in what else "dim" if what.startswith("finished") else "")
            table_rows.append(cells(str(i), (name, style), depth, node, (what, style)))
        self.table.set_rows(table_rows, [r[0] for r in rows])

    def selected_thread(self) -> str | None:
        """The thread on the table's cursor row (``p`` pauses it)."""
        table = self.table
        return table.key(table.cursor_row) if table.row_count else None
