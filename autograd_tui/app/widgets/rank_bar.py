"""The ranks bar: over the debugger of one rank of a data-parallel run (``torch --ranks``,
``replay`` of several ranks' recordings), every rank and where each one is shown.

One line: ``ranks (< >)  ▶ rank 0 · event 12/81   rank 1 · event 81/81`` (over four
ranks, ``▶ 0: 12/81   1: 81/81 ...``); the rank on screen is marked.  Each rank keeps
its own position: stepping one leaves the others."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from autograd_tui.app.widgets.text_line import TextLine


class RankBar(TextLine):
    """``show([(rank, shown event, newest event), ...], current rank)``."""

    def show(self, ranks: Sequence[tuple[int, int, int]], current: int) -> None:
        line = Text.assemble(("ranks", "bold"), " (< >) ")
        short = len(ranks) > 4  # many ranks: a short form, so that a line holds them
        for rank, shown, newest in ranks:
            here = rank == current
            line.append(" ▶ " if here else "   ")
            line.append(f"{rank}: {shown}/{newest}" if short
                        else f"rank {rank} · event {shown}/{newest}",
                        style="bold reverse" if here else "")
        self.update(line)
