"""A side pane: the ready queues, the not_ready map or the GraphTasks, as text."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class SidePane(Static):
    """A bordered text whose height only grows during a run (``reset`` for the next), so
    that stepping does not make the panes below it jump up and down, nor re-lay out the
    screen every few steps."""

    def __init__(self, title: str, *, id: str | None = None, classes: str = "pane") -> None:
        super().__init__("", id=id, classes=classes)
        self.border_title = title

    def reset(self) -> None:
        """A new run: the pane fits its content again."""
        self.styles.min_height = None

    def show(self, text: Text) -> None:
        """Update the text only if it changed, and re-lay out the screen only if the pane
        must grow: a layout costs more than all the rest of a step."""
        if self.content == text:
            return
        height = self.styles.height
        if not self.display or (height is not None and not height.is_auto):
            # Hidden (a tab not shown) or of a fixed height (a short terminal): its size
            # does not follow the text, and a layout here would come at every step.
            self.update(text, layout=False)
            return
        size, container = self.size, self.container_size
        if not size.width:
            self.update(text)  # not laid out yet
            return
        self.update(text, layout=False)  # the width is the pane's: only the height varies
        after = self.get_content_height(container, container, size.width)
        if after > size.height:
            outer = after + self.styles.gutter.height
            cap = self.styles.max_height
            if cap is not None and cap.is_cells:
                outer = min(outer, int(cap.value))
            if outer > self.outer_size.height:
                self.styles.min_height = outer  # a layout, once
