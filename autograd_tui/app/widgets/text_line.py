"""``TextLine``: one line of Rich text drawn as one ``Strip`` (the header, the timeline)."""

from __future__ import annotations

from rich.text import Text
from textual.strip import Strip
from textual.widget import Widget


class TextLine(Widget):
    """One line of Rich text (the header, the timeline), cut with "…" to the width.

    A ``Static`` converts its text to ``Content`` and lays it out again at each update,
    a millisecond for one line; this renders one ``Strip``."""

    DEFAULT_CSS = """
    TextLine {
        height: 1;
    }
    """

    def __init__(self, *, center: bool = False, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.center = center
        self._text = Text()
        self._strip: tuple[int, Strip] | None = None  # (width, the line)

    @property
    def content(self) -> Text:
        return self._text

    def update(self, text: Text) -> None:
        if text != self._text:
            self._text, self._strip = text, None
            self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strip = None

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        style = self.rich_style
        if y:
            return Strip.blank(width, style)
        if self._strip is None or self._strip[0] != width:
            text = self._text.copy()
            text.truncate(width, overflow="ellipsis")
            if self.center:
                text.pad_left((width - text.cell_len) // 2)
            strip = Strip(text.render(self.app.console, end=""), text.cell_len)
            self._strip = (width, strip.apply_style(style).extend_cell_length(width, style))
        return self._strip[1]
