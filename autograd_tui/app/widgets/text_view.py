"""``TextView``: Rich text shown line by line with Textual's Line API (the graph pane).

A ``Static`` converts and re-renders all of its text at every update; this re-renders
only the lines that changed.
"""

from __future__ import annotations

from rich.text import Text
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from autograd_tui.app.widgets.scrolling import set_virtual_size


class TextView(ScrollView, inherit_bindings=False):
    """Rich text shown line by line, scrollable both ways (the graph pane).

    ``set_lines`` redraws only the lines that changed; each line's ``Strip`` is kept
    while the line is the same ``Text`` object (or an equal one)."""

    DEFAULT_CSS = """
    TextView {
        background: $surface 0%;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._lines: list[Text] = []
        self._strips: dict[int, tuple[Text, Strip]] = {}

    @property
    def content(self) -> Text:
        """All the lines, as one ``Text``."""
        return Text("\n").join(self._lines)

    def update(self, text: Text) -> None:
        self.set_lines(list(text.split("\n", allow_blank=True)) if text.plain else [])

    def set_lines(self, lines: list[Text]) -> None:
        old, new = self._lines, list(lines)
        for i, line in enumerate(new):
            if i < len(old) and (line is old[i] or line == old[i]):
                new[i] = old[i]  # the same object: its cached strip stays valid
            else:
                self.refresh_line(i)
        for i in range(len(new), len(old)):
            self.refresh_line(i)
        self._lines = new
        width = max((line.cell_len for line in new), default=0)
        set_virtual_size(self, Size(width, len(new)))

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        style = self.rich_style
        i = scroll_y + y
        if i >= len(self._lines):
            return Strip.blank(width, style)
        line = self._lines[i]
        hit = self._strips.get(i)
        if hit is None or hit[0] is not line:
            strip = Strip(line.render(self.app.console, end=""), line.cell_len).apply_style(style)
            hit = self._strips[i] = (line, strip)
        return hit[1].crop_extend(scroll_x, scroll_x + width, style)
