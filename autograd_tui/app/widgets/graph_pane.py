"""The graph pane: the backward graph drawn as boxes in layers, a framed group per
GraphTask (``#graph``, ``graph_draw``), or, for a large graph or on ``v``, the compact
list view (``#node-list``), or for a PyTorch graph (``node_meta``) the grouped view
(``#group-list``: its nodes by nn.Module); below any of them the details of one node
(``#details``, on ``d``).  Its colours are the theme's ``graph-*`` variables
(``palette``), read again when the theme changes."""

from __future__ import annotations

from dataclasses import dataclass

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.geometry import Region
from textual.message import Message
from textual.theme import Theme

from autograd_tui.app import graph_draw, render
from autograd_tui.app.theme import ANSI, Palette
from autograd_tui.app.widgets.group_table import GROUP_KEY, GroupTable
from autograd_tui.app.widgets.line_table import LineTable
from autograd_tui.app.widgets.rows import Row, cells
from autograd_tui.app.widgets.text_view import TextView
from autograd_tui.history.state import EngineState

LIST_VIEW_ABOVE = 60  # nodes: larger graphs open in the compact list view
LAZY_LIST_ABOVE = 2000  # nodes: the list view makes only the rows on screen
NODE_COLUMNS = ("id", "node", "device", "state", "deps", "seq", "where")


def list_cells(r: tuple[str, ...], palette: Palette = ANSI) -> Row:
    """A row of ``render.list_rows`` as the list view's cells: the name and the state in
    the state's colour."""
    style = palette.style(r[3].replace(" ", "_"))
    return cells(r[0], (r[1], style), r[2], (r[3], style), *r[4:])


class GraphPane(Vertical):
    """Draws an ``EngineState`` with the node that the shown event touched highlighted."""

    BORDER_TITLE = "graph"

    @dataclass
    class NodeChosen(Message):
        """A row of the list view was chosen: its node's details are shown."""

        node: int

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.view_presses = 0  # v: the next of the views this graph has
        self.details_node: int | None = None  # chosen in the list; else the touched node
        self._list_raw: list[tuple[str, ...]] | None = None  # what the list view shows
        self._list_cells: dict[tuple[str, ...], Row] = {}
        self._lazy_order: tuple[object, list[int], list[int]] | None = None  # big graphs
        self.palette = ANSI  # the theme's (on mount, and when the theme changes)
        self.forward: graph_draw.Forward = {}  # the scenario's FORWARD (Session.forward)
        self._shown: tuple[EngineState, int | None] | None = None
        self._scrolled_to: int | None = None  # the node the boxes view last scrolled to
        self._details_of: int | None = None  # the node whose details the pane shows
        self.frames = False  # F: the details list every frame of the forward op

    def on_mount(self) -> None:
        self._theme_changed(self.app.current_theme)
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)

    def on_resize(self) -> None:
        if self._shown is not None:  # the frames fill the pane's width
            self.show(*self._shown)

    def _theme_changed(self, theme: Theme) -> None:
        """Read the graph's colours again and redraw with them."""
        palette = Palette.of(self.app.theme_variables, theme)
        if palette == self.palette:
            return
        self.palette = palette
        self._list_raw, self._list_cells = None, {}
        if self._shown is not None:
            self.show(*self._shown)

    def compose(self) -> ComposeResult:
        yield TextView(id="graph")
        yield LineTable(NODE_COLUMNS, zebra=True, grow_only=True, id="node-list")
        yield GroupTable(id="group-list")
        yield TextView(id="details")  # scrolls: a node's saved tensors can be many

    def reset(self) -> None:
        """A new run: nothing of the last one's graph is kept."""
        self.details_node = None
        self._list_raw = self._lazy_order = self._shown = self._scrolled_to = None
        self._details_of = None
        self.query_one("#node-list", LineTable).clear()
        self.query_one(GroupTable).reset()

    def toggle_details(self) -> None:
        self.query_one("#details").toggle_class("shown")

    def toggle_frames(self) -> None:
        """F: the node's whole forward stack in its details, or its program frame only."""
        self.frames = not self.frames
        self.query_one("#details").add_class("shown")
        if self._shown is not None:
            self.show(*self._shown)

    def scroll_details(self, dy: int) -> None:
        self.query_one("#details", TextView).scroll_relative(0, dy, animate=False)

    def pan(self, dx: int, dy: int) -> None:
        self.query_one("#graph", TextView).scroll_relative(dx, dy, animate=False)

    def reveal(self, node: int | None) -> bool:
        """The grouped view: open the groups holding ``node`` and select its row."""
        table = self.query_one(GroupTable)
        if not self.has_class("groups") or not table.reveal(node):
            return False
        table.focus()
        return True

    @on(LineTable.Selected, "#node-list, #group-list")
    def _chosen(self, event: LineTable.Selected) -> None:
        event.stop()
        if event.key.startswith(GROUP_KEY):  # a group's row: open or close it
            self.query_one(GroupTable).toggle(event.key[len(GROUP_KEY):])
            return
        self.details_node = int(event.key)
        self.query_one("#details").add_class("shown")
        self.post_message(self.NodeChosen(self.details_node))

    # --- drawing --------------------------------------------------------------------------
    def view(self, state: EngineState) -> str:
        """``graph``, ``list`` or ``groups``: what ``v`` picked among this graph's views
        (a large graph has no boxes; a graph without ``node_meta``, no groups)."""
        big = len(state.nodes) > LIST_VIEW_ABOVE
        if not state.node_meta:
            return "list" if big or self.view_presses % 2 else "graph"
        views = ("groups", "list") if big else ("graph", "groups", "list")
        return views[self.view_presses % len(views)]

    def show(self, state: EngineState, highlight: int | None,
             forward: graph_draw.Forward | None = None) -> None:
        if forward is not None:
            self.forward = forward
        self._shown = (state, highlight)
        view = self.view(state)
        self.set_class(view == "list", "list")
        self.set_class(view == "groups", "groups")
        title = f"graph: {len(state.nodes)} nodes" + {
            "graph": "", "list": "  (list view: v toggles)",
            "groups": "  by module (enter opens, f finds, v view)"}[view]
        if self.border_title != title:  # setting it, even unchanged, repaints the pane
            self.border_title = title
        if view == "groups":
            self.query_one(GroupTable).show(state, highlight, self.palette)
        elif view == "list":
            self._show_list(state)
        else:
            self._show_boxes(state, highlight)
        node = self.details_node if self.details_node is not None else highlight
        if node is None:  # an event of no node (the last, at the end of play): the details
            node = self._details_of  # shown stay of their node, at this event (not stale)
        details = self.query_one("#details", TextView)
        if details.has_class("shown") and node is not None:
            if node != self._details_of:
                details.scroll_to(0, 0, animate=False, immediate=True)  # another node: its top
            self._details_of = node
            details.update(render.node_details(state, node, forward=self.forward,
                                               frames=self.frames))

    def drawing(self, state: EngineState, highlight: int | None) -> graph_draw.Block:
        """The boxes view of ``state`` as this pane draws it: its palette, the scenario's
        forward ops, frames as wide as the pane less a vertical scrollbar's room (there
        or not: it comes and goes with the graph's height, and must not make the lines
        too wide)."""
        view = self.query_one("#graph", TextView)
        fill = view.size.width - view.styles.scrollbar_size_vertical
        return graph_draw.draw(state, highlight, palette=self.palette, forward=self.forward,
                               fill=fill)

    def _show_boxes(self, state: EngineState, highlight: int | None) -> None:
        """The boxes; when the touched node changes, scroll (as little as needed) so that
        its box is in view.  An event of no node brings its GraphTask's frame to the top
        of the pane (of no GraphTask either: the one its thread is inside, else the
        newest that runs), so that where a run stops decides what is shown."""
        view = self.query_one("#graph", TextView)
        drawing = self.drawing(state, highlight)
        view.set_lines(drawing.lines)
        target = highlight if highlight is not None else _task_of(state)
        if target == self._scrolled_to:
            return
        self._scrolled_to = target
        height = view.scrollable_content_region.height
        if highlight is not None:
            at = drawing.where.get(highlight)
            region = Region(at[1], at[0], graph_draw.BOX_WIDTH, at[2]) if at else None
        else:
            at = (drawing.tasks or {}).get(-target) if target is not None else None
            region = Region(0, at[0], 1, height) if at else None
        if region is not None:
            view.scroll_to_region(region, animate=False, immediate=True)

    def _show_list(self, state: EngineState) -> None:
        table = self.query_one("#node-list", LineTable)
        if len(state.nodes) > LAZY_LIST_ABOVE:  # only the rows on screen are made
            self._list_raw = None
            last = next(reversed(state.nodes.values()))
            if self._lazy_order is None or self._lazy_order[0] != (len(state.nodes), last):
                self._lazy_order = ((len(state.nodes), last), state.topological_order(),
                                    render.list_widths(state))
            order, widths = self._lazy_order[1], self._lazy_order[2]

            def fetch(i: int) -> Row:
                return list_cells(render.list_row(state, order[i]), self.palette)

            table.set_lazy_rows(len(order), fetch, widths, key=lambda i: str(order[i]))
            return
        raw = render.list_rows(state)
        if raw == self._list_raw:
            return
        self._list_raw = raw
        rows: list[Row] = []
        made = self._list_cells  # a row's cells, by its text: most rows stay the same
        if len(made) > 8192:
            made.clear()
        for r in raw:
            row = made.get(r)
            if row is None:
                row = made[r] = list_cells(r, self.palette)
            rows.append(row)
        table.set_rows(rows, [r[0] for r in raw])


def _task_of(state: EngineState) -> int | None:
    """The GraphTask an event of no node concerns, as a scroll target (its id, negated:
    node ids are the other targets)."""
    last = state.last_event
    if last is None:
        return None
    gid = last.graph_task
    if gid is None:
        th = state.threads.get(last.thread)
        gid = th.nodes[-1][0] if th is not None and th.nodes else None
    if gid is None:
        running = [g for g in state.graph_tasks.values() if not g.completed]
        gid = max(running, key=lambda g: (g.created, g.id)).id if running else None
    return -gid if gid is not None else None
