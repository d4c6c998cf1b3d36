"""The timeline: a scrub bar of the whole run under the event log."""

from __future__ import annotations

from rich.text import Text

from autograd_tui.app.widgets.text_line import TextLine


class Timeline(TextLine):
    """Where the shown event sits among all the events, and the run's status."""

    _shown: tuple[int, int, str] | None = None

    def on_resize(self) -> None:
        # The first show() runs before layout (width 0): draw again at the real width.
        if self._shown is not None:
            self.show(*self._shown)

    def show(self, index: int, total: int, status: str) -> None:
        self._shown = (index, total, status)
        width = max(self.size.width - 24, 10)
        pos = 0 if total == 0 else round(index / total * (width - 1))
        bar = Text("▕")
        bar.append("━" * pos, style="bold")
        bar.append("●", style="bold yellow")
        bar.append("─" * max(width - pos - 1, 0), style="dim")
        bar.append("▏ ")
        bar.append(f"{index}/{total}", style="bold")
        bar.append(f"  {status}", style="bold red" if status == "deadlock" else "")
        self.update(bar)
