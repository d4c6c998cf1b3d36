"""The copy keys of the debugger screen (``y``, ``Y``): the shown event's line, the
node details, as text on the clipboard."""

from __future__ import annotations

from typing import Any

from autograd_tui.app import render
from autograd_tui.app.widgets import GraphPane
from autograd_tui.words import format_event


def copy_event(v: Any) -> None:
    """The shown event's line (as the log shows it, with its number), as text."""
    s, k = v.session, v.cursor
    if s is None or k == 0:
        v.notify("no event is shown (at 0, before the first): nothing copied", timeout=3)
        return
    line = format_event(s.event(k - 1), v.names()).strip()
    v.app.copy_to_clipboard(line)
    v.notify(line, title=f"copied event {k}", timeout=4)


def copy_node(v: Any) -> None:
    """The details of the node ``d`` shows (chosen in the list, else the one the
    shown event touched), as text."""
    s = v.session
    if s is None:
        return
    state = s.state_at(v.cursor)
    pane = v.query_one(GraphPane)
    node = pane.details_node
    if node is None and state.last_event is not None:
        node = state.last_event.node
    if node is None or node not in state.nodes:
        v.notify("no node to copy: the shown event touches none (choose one in the "
                 "list view, v)", timeout=3)
        return
    text = render.node_details(state, node, forward=pane.forward).plain.rstrip()
    v.app.copy_to_clipboard(text)
    v.notify(text.splitlines()[0], title="copied node details", timeout=4)
