"""``LineTable``: rows of ``(text, style)`` cells drawn with Textual's Line API (the event
log, the list view, the threads pane).

Why not ``DataTable``: every ``add_row`` / ``update_cell`` clears all of a
DataTable's render caches, so each step re-rendered every visible cell of the
event log and of the 253-row list view, cell by cell through Rich: most of a
step's time.  Here a row is plain data (``rows.Row``), each row's rendered
``Strip`` is cached until that row, the column widths, the cursor or the styles
change, only the visible lines are ever rendered, and an update refreshes only
the lines whose row changed.

A row is usually one line; a subclass may draw a row on several lines
(``row_lines``), as the threads pane does to wrap a long state.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from autograd_tui.app.widgets.rows import LazyRows, Row
from autograd_tui.app.widgets.scrolling import set_virtual_size

GAP = 2  # blanks between columns


class LineTable(ScrollView, can_focus=True, inherit_bindings=False):
    """Rows of styled cells under an optional header, with a row cursor.

    ``up`` / ``down`` / ``pageup`` / ``pagedown`` move the cursor when the table has
    the focus; ``enter`` or a click on a row posts ``LineTable.Selected``.  Not the
    scroll bindings of a ScrollView: ``left`` / ``right`` stay the app's (history).
    """

    BINDINGS = [
        Binding("up", "cursor(-1)", show=False),
        Binding("down", "cursor(1)", show=False),
        Binding("pageup", "page(-1)", show=False),
        Binding("pagedown", "page(1)", show=False),
        Binding("enter", "select", show=False),
    ]

    COMPONENT_CLASSES = {"line-table--header", "line-table--cursor", "line-table--even-row"}

    DEFAULT_CSS = """
    LineTable {
        background: $surface;
        color: $foreground;
        & > .line-table--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        & > .line-table--even-row {
            background: $surface-lighten-1 50%;
        }
        & > .line-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        &:focus > .line-table--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
            text-style: $block-cursor-text-style;
        }
    }
    """

    class Selected(Message):
        """A row was clicked, or ``enter`` was pressed on the cursor's row."""

        def __init__(self, table: LineTable, index: int, key: str) -> None:
            super().__init__()
            self.table = table
            self.index = index
            self.key = key

        @property
        def control(self) -> LineTable:
            return self.table

    def __init__(self, header: Sequence[str] | None = None, *, zebra: bool = False,
                 grow_only: bool = False, id: str | None = None,
                 classes: str | None = None) -> None:
        """``grow_only``: the table's height and its columns never shrink until ``clear()``
        (a column that widens and narrows as states come and go redraws every line and
        the scrollbars; fewer lines in a table of auto height re-lay out the screen)."""
        super().__init__(id=id, classes=classes)
        self.header = tuple(header) if header else None
        self.zebra = zebra
        self.grow_only = grow_only
        self._floor = 0  # grow_only: the most lines shown since clear()
        self._real_lines = 0  # lines of rows (the rest, if any, is blank)
        self._rows: list[Row] | LazyRows = []
        self._keys: Sequence[str] | Callable[[int], str] | None = None  # None: the index
        self._widths: list[int] = [cell_len(h) for h in self.header or ()]
        self.cursor_row = 0
        self._strips: LRUCache[int, tuple[tuple[object, ...], list[Strip]]] = LRUCache(1024)
        self._styles: dict[str, Style] = {}
        self._starts: list[int] | None = None  # first line of each row, when rows vary
        self._lines_width = -1  # the width the row heights were computed for
        self._pending_scroll: int | None = None  # a row to scroll to once laid out

    # --- data -------------------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        return len(self._rows)

    def row(self, index: int) -> Row:
        return self._rows[index]

    def key(self, index: int) -> str:
        if self._keys is None:
            return str(index)
        return self._keys(index) if callable(self._keys) else self._keys[index]

    def set_lazy_rows(self, count: int, fetch: Callable[[int], Row], widths: Sequence[int],
                      key: Callable[[int], str] | None = None) -> None:
        """Show ``count`` rows, each made by ``fetch(i)`` only when it is drawn, in columns
        of these widths (measuring every row would mean making them all).  Call it again
        when what the rows show has changed: with the same count and widths, only the
        visible rows that differ are redrawn."""
        old = self._rows
        self._rows = LazyRows(count, fetch)
        self._keys = key
        widths = list(widths)
        if self.grow_only:
            widths = [max(a, b) for a, b in zip(widths, self._widths)] + \
                widths[len(self._widths):]
        self.cursor_row = min(self.cursor_row, max(count - 1, 0))
        if isinstance(old, LazyRows) and len(old) == count and widths == self._widths \
                and self._starts is None:
            # the same table with other values (the next step): redraw the rows on screen
            # that differ (a row's strip is cached under its cells)
            top = max(self.scroll_offset.y - self._header_lines, 0)
            for i in range(top, min(count, top + self.size.height)):
                if old.made(i) != self._rows[i]:
                    self._refresh_row(i)
            return
        self._widths = widths
        self._resized()
        self.refresh()

    def set_rows(self, rows: Sequence[Row], keys: Sequence[str] | None = None) -> None:
        """Show these rows: only the lines of rows that changed are redrawn."""
        old = self._rows if isinstance(self._rows, list) else []  # lazy: all new
        self._rows = list(rows)
        self._keys = list(keys) if keys is not None else None
        changed = [i for i, (new, was) in enumerate(zip(self._rows, old))
                   if new is not was and new != was]
        if not changed and len(old) == len(self._rows):
            return
        widths = self._measure(self._rows, self._widths if self.grow_only else None)
        if widths != self._widths or len(old) != len(self._rows) or self._starts is not None:
            self._widths = widths
            self._resized()
            self.refresh()
        else:
            for i in changed:
                self._refresh_row(i)
        self.cursor_row = min(self.cursor_row, max(len(self._rows) - 1, 0))

    def append_rows(self, rows: Sequence[Row]) -> None:
        """Add rows at the end (keys are indices): the event log's one change a step."""
        if not rows:
            return
        start = len(self._rows)
        self._rows.extend(rows)
        widths = self._measure(rows, self._widths)
        if widths != self._widths:
            self._widths = widths
            self.refresh()
        self._resized()
        if self._starts is None:  # only the new rows that are on screen
            top = self.scroll_offset.y
            start = max(start, top - self._header_lines)
            end = min(len(self._rows), top + self.size.height)
        else:
            end = len(self._rows)
        for i in range(start, end):
            self._refresh_row(i)

    def clear(self) -> None:
        self._rows, self._keys, self.cursor_row, self._floor = [], None, 0, 0
        self._widths = [cell_len(h) for h in self.header or ()]
        self._strips.clear()
        self._resized()
        self.refresh()

    def _measure(self, rows: Sequence[Row], start: Sequence[int] | None = None) -> list[int]:
        widths = list(start if start is not None else [cell_len(h) for h in self.header or ()])
        columns = max(map(len, rows), default=0)
        widths.extend([0] * (columns - len(widths)))
        for c in range(columns):  # column by column: the C-level max does the looping
            texts = [row[c][0] for row in rows if len(row) > c]
            if texts:
                widest = max(texts, key=len)
                n = len(widest) if "".join(texts).isascii() else max(map(cell_len, texts))
                widths[c] = max(widths[c], n)
        return widths

    # --- lines ------------------------------------------------------------------------------
    def row_lines(self, row: Row, width: int) -> list[Text]:
        """The row's lines (one by default: the cells in columns)."""
        line = Text(no_wrap=True, end="")
        last = len(row) - 1
        for c, (text, style) in enumerate(row):
            pad = 0 if c == last else self._widths[c] - cell_len(text) + GAP
            line.append(text + " " * pad, style=style or None)
        return [line]

    def row_height(self, row: Row, width: int) -> int:
        """Lines per row: override with ``row_lines`` for rows of several lines."""
        return 1

    @property
    def _header_lines(self) -> int:
        return 1 if self.header else 0

    def _content_width(self) -> int:
        return sum(self._widths) + GAP * max(len(self._widths) - 1, 0)

    def _resized(self) -> None:
        """Recompute the row offsets (for multi-line rows) and the virtual size."""
        width = self.scrollable_content_region.width or self.size.width
        self._lines_width = width
        if type(self).row_height is LineTable.row_height:
            self._starts, lines = None, len(self._rows)
        else:
            self._starts, lines = [], 0
            for row in self._rows:
                self._starts.append(lines)
                lines += self.row_height(row, width)
        self._real_lines = lines
        if self.grow_only:
            lines = self._floor = max(lines, self._floor)
        set_virtual_size(self, Size(self._content_width(), lines + self._header_lines))

    def _row_at_line(self, line: int) -> tuple[int, int]:
        """(row, line within the row) of a line of rows."""
        if self._starts is None:
            return line, 0
        r = bisect_right(self._starts, line) - 1
        return r, line - self._starts[r]

    def _first_line(self, r: int) -> int:
        return r if self._starts is None else self._starts[r]

    def _height(self, r: int) -> int:
        if self._starts is None:
            return 1
        end = self._starts[r + 1] if r + 1 < len(self._starts) else self._real_lines
        return end - self._starts[r]

    def _refresh_row(self, r: int) -> None:
        top = self._first_line(r) + self._header_lines - self.scroll_offset.y
        height = self._height(r)
        if top + height > self._header_lines and top < self.size.height:
            self.refresh_lines(self._first_line(r) + self._header_lines, height)

    def on_resize(self, event: events.Resize) -> None:
        if self._starts is not None or type(self).row_height is not LineTable.row_height:
            if self.scrollable_content_region.width != self._lines_width:
                self._resized()
                self.refresh()
        if self._pending_scroll is not None and self._pending_scroll < len(self._rows):
            self._scroll_to_row(self._pending_scroll)

    # --- styles -----------------------------------------------------------------------------
    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        self._strips.clear()

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            base = self.rich_style
            # not partial: a partial style keeps a translucent background unblended
            style = base if name == "base" else base + self.get_component_rich_style(
                f"line-table--{name}")
            self._styles[name] = style
        return style

    # --- rendering --------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        if self.header and y == 0:
            style = self._style("header")
            text = Text(no_wrap=True, end="")
            for c, h in enumerate(self.header):
                last = c == len(self.header) - 1
                text.append(h if last else h.ljust(self._widths[c] + GAP))
            strip = Strip(text.render(self.app.console, end=""), text.cell_len)
            return strip.apply_style(style).crop_extend(scroll_x, scroll_x + width, style)
        line = scroll_y + y - self._header_lines
        if line < 0 or line >= self._real_lines or not self._rows:
            return Strip.blank(width, self._style("base"))
        r, k = self._row_at_line(line)
        if r >= len(self._rows):
            return Strip.blank(width, self._style("base"))
        strips, style = self._row_strips(r, width)
        strip = strips[k] if k < len(strips) else Strip.blank(0)
        return strip.crop_extend(scroll_x, scroll_x + width, style)

    def _row_strips(self, r: int, width: int) -> tuple[list[Strip], Style]:
        name = "cursor" if r == self.cursor_row else (
            "even-row" if self.zebra and r % 2 else "base")
        style = self._style(name)
        row = self._rows[r]
        key = (row, tuple(self._widths), name, width if self._starts is not None else 0)
        hit = self._strips.get(r)
        if hit is not None and hit[0] == key:
            return hit[1], style
        strips = []
        for text in self.row_lines(row, width):
            segments = text.render(self.app.console, end="")
            if name == "cursor":  # the cursor's colours win over the cells'
                strip = Strip([Segment(s.text, style + s.style + style if s.style else style,
                                       s.control) for s in segments], text.cell_len)
            else:
                strip = Strip(segments, text.cell_len).apply_style(style)
            strips.append(strip)
        self._strips[r] = (key, strips)
        return strips, style

    # --- the cursor -------------------------------------------------------------------------
    def move_cursor(self, row: int, *, scroll: bool = True) -> None:
        """Put the cursor on ``row`` (and scroll it into view)."""
        if not self._rows:
            return
        row = max(0, min(row, len(self._rows) - 1))
        if row != self.cursor_row:
            old, self.cursor_row = self.cursor_row, row
            if old < len(self._rows):
                self._refresh_row(old)
            self._refresh_row(row)
        if scroll:
            self._scroll_to_row(row)

    def _scroll_to_row(self, r: int) -> None:
        top = self._first_line(r)
        bottom = top + self._height(r)
        visible = self.scrollable_content_region.height - self._header_lines
        if visible <= 0:  # not laid out yet (or hidden): scroll once it has a size
            self._pending_scroll = r
            return
        self._pending_scroll = None
        y = self.scroll_offset.y
        if top < y:
            self.scroll_to(y=top, animate=False)
        elif bottom > y + visible:
            self.scroll_to(y=bottom - visible, animate=False)

    def action_cursor(self, delta: int) -> None:
        self.move_cursor(self.cursor_row + delta)

    def action_page(self, direction: int) -> None:
        page = max(self.scrollable_content_region.height - self._header_lines, 1)
        self.move_cursor(self.cursor_row + direction * page)

    def action_select(self) -> None:
        if self._rows:
            self.post_message(self.Selected(self, self.cursor_row, self.key(self.cursor_row)))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y < self._header_lines or not self._rows:
            return
        line = self.scroll_offset.y + offset.y - self._header_lines
        if line >= self._real_lines:
            return
        r, _ = self._row_at_line(line)
        self.move_cursor(r)
        self.post_message(self.Selected(self, r, self.key(r)))
