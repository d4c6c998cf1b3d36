"""``set_virtual_size``: what the line widgets (``LineTable``, ``TextView``) call when
their content grows or shrinks, so that a step seldom re-lays out the screen."""

from __future__ import annotations

from textual.geometry import Size
from textual.scroll_view import ScrollView


def set_virtual_size(view: ScrollView, size: Size) -> None:
    """Set a line widget's virtual size; re-lay out the screen only if the widget's own
    height follows it.

    (``virtual_size`` is a layout reactive: the event log grows a line a step, and a
    layout of the whole screen cost more than everything else in a step.)"""
    if size == view.virtual_size:
        return
    height = view.styles.height
    if (height is None or height.is_auto) and size.height != view.virtual_size.height:
        view.virtual_size = size
        return
    view.set_reactive(ScrollView.virtual_size, size)
    # As Widget._scroll_update, but a scrollbar is redrawn only if it changes (that one
    # redraws both, each about a millisecond; the event log's height changes each step).
    view._refresh_scrollbars()  # shown or hidden: a layout if that changes
    width, height = view.container_size
    if view.show_vertical_scrollbar:
        view.vertical_scrollbar.window_virtual_size = size.height
        view.vertical_scrollbar.window_size = height - view.scrollbar_size_horizontal
    if view.show_horizontal_scrollbar:
        view.horizontal_scrollbar.window_virtual_size = size.width
        view.horizontal_scrollbar.window_size = width - view.scrollbar_size_vertical
    view.scroll_x = view.validate_scroll_x(view.scroll_x)
    view.scroll_y = view.validate_scroll_y(view.scroll_y)
