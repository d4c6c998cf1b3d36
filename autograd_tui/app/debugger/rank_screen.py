"""``RankScreen``: the debugger screen of one rank among several (a data-parallel run's
recordings, side by side), with the ranks bar over it and the keys that go to another
rank (``<`` and ``>``: the app's ``rank`` action).

Each rank is its own ``DebuggerScreen`` with its own session and cursor (installed in the
app, so a screen that is not shown keeps its position); going to another rank shows its
screen where it was left."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches

from autograd_tui.app.debugger.screen import DebuggerScreen
from autograd_tui.app.widgets.rank_bar import RankBar


class RankScreen(DebuggerScreen):
    """The debugger of rank ``rank``; the app says where every rank is (``rank_places``)."""

    BINDINGS = [
        Binding("greater_than_sign", "app.rank(1)", "Next rank", key_display=">",
                tooltip="Show the next rank (each rank keeps its own position)"),
        Binding("less_than_sign", "app.rank(-1)", "Prev rank", key_display="<", show=False,
                tooltip="Show the previous rank"),
    ]

    def __init__(self, rank: int, total: int, **source: Any) -> None:
        super().__init__(**source)
        self.rank = rank
        self.total = total  # the recording's events: its newest, before the screen opens it

    def compose(self) -> ComposeResult:
        yield RankBar(id="rank-bar")
        yield from super().compose()

    def place(self) -> tuple[int, int, int]:
        """(rank, shown event, newest event); a rank not opened yet opens at its newest."""
        if self.seen < 0:
            return self.rank, self.total, self.total
        return self.rank, self.cursor, self.seen

    def update_title(self) -> None:
        super().update_title()
        self.show_ranks()

    def show_ranks(self) -> None:
        try:
            bar = self.query_one(RankBar)
        except NoMatches:  # before compose, or quitting
            return
        bar.show(getattr(self.app, "rank_places", lambda: [self.place()])(), self.rank)

    def on_screen_resume(self) -> None:
        self.show_ranks()
