"""``GroupTable``: the grouped view of a PyTorch graph (``#group-list``): one row per
nn.Module group (``module_tree``), collapsed until opened, with the nodes inside it
when open.

A group's row: ``▸`` (closed) or ``▾`` (open), its label, and how many of its nodes are
in each state, by the states' badges (``186 nodes: ▶1 W1 ✓52 ·132``: words would not fit
the pane), in the colour of its busiest state.  A node's row: id, badge and name, then
the list view's columns.  The groups that hold the node the shown event touched are
drawn in reverse video, and so is that node's row: stepping through a closed group
stays visible.
"""

from __future__ import annotations

from collections.abc import Sequence

from autograd_tui.app import render
from autograd_tui.app.theme import ANSI, Palette
from autograd_tui.app.widgets.line_table import LineTable
from autograd_tui.app.widgets.rows import Row, cells
from autograd_tui.history.module_tree import (
    STATE_ORDER,
    Group,
    ModuleTree,
    module_tree,
    state_counts,
)
from autograd_tui.history.state import EngineState
from autograd_tui.words import seq_text

GROUP_COLUMNS = ("module / node", "device", "state", "deps", "seq", "where")
GROUP_KEY = "g:"  # a group row's key: ``g:`` and the group's key (a node row's: its id)
INDENT = 2  # cells per level


class GroupTable(LineTable):
    """The grouped view: ``show`` draws a state; ``toggle`` opens or closes a group;
    ``reveal`` opens the groups holding a node and puts the cursor on it."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(GROUP_COLUMNS, id=id, classes=classes)
        self.expanded: set[str] = set()  # the keys of the open groups
        self._tree: tuple[object, ModuleTree] | None = None
        self._shown: tuple[EngineState, int | None, Palette] | None = None

    def reset(self) -> None:
        self.expanded.clear()
        self._tree = self._shown = None
        self.clear()

    def tree(self, state: EngineState) -> ModuleTree:
        """The groups, made again only when the graph or its ``node_meta`` grew."""
        meta = state.node_meta
        key = (len(state.nodes), next(reversed(state.nodes), None), len(meta),
               next(reversed(meta), None))
        if self._tree is None or self._tree[0] != key:
            self._tree = (key, module_tree(state))
        return self._tree[1]

    # --- what the keys do ---------------------------------------------------------------
    def toggle(self, key: str) -> None:
        self.expanded.symmetric_difference_update({key})
        self._redraw()

    def reveal(self, node: int | None) -> bool:
        """Open the groups holding ``node``, put the cursor on its row: False if it has
        none (or no state is shown)."""
        if self._shown is None or node is None:
            return False
        keys = self.tree(self._shown[0]).where.get(node)
        if keys is None:
            return False
        self.expanded.update(keys)
        self._redraw()
        row = next((i for i in range(self.row_count) if self.key(i) == str(node)), None)
        if row is not None:
            self.move_cursor(row)
        return row is not None

    def _redraw(self) -> None:
        if self._shown is not None:
            self.show(*self._shown)

    # --- drawing ------------------------------------------------------------------------
    def show(self, state: EngineState, highlight: int | None, palette: Palette = ANSI
             ) -> None:
        self._shown = (state, highlight, palette)
        tree = self.tree(state)
        marked = set(tree.where.get(highlight, ())) if highlight is not None else set()
        rows: list[Row] = []
        keys: list[str] = []

        def add(groups: list[Group], depth: int) -> None:
            for g in groups:
                open_ = g.key in self.expanded
                style = "bold reverse" if g.key in marked else "bold"
                label = " " * (INDENT * depth) + ("▾ " if open_ else "▸ ") + g.label
                rows.append(cells((label, style), group_summary(state, g.nodes, palette)))
                keys.append(GROUP_KEY + g.key)
                if open_:
                    for n in g.own:
                        rows.append(node_cells(state, n, depth + 1, n == highlight,
                                               palette))
                        keys.append(str(n))
                    add(g.children, depth + 1)

        add(tree.groups, 0)
        self.set_rows(rows, keys)

    def _measure(self, rows: Sequence[Row], start: Sequence[int] | None = None) -> list[int]:
        """A group's summary, its row's last cell, spans the columns after the label: it
        does not widen the device column."""
        return super()._measure([r[:-1] if len(r) < len(GROUP_COLUMNS) else r for r in rows],
                                start)


def group_summary(state: EngineState, nodes: list[int], palette: Palette = ANSI
                  ) -> tuple[str, str]:
    """``186 nodes: ▶1 W1 ✓52 ·132`` and the style of the first state of ``STATE_ORDER``
    that some node is in (running, then ready, ...)."""
    counts = state_counts(state, nodes)
    present = [st for st in STATE_ORDER if counts.get(st)]
    text = " ".join(f"{palette.state(st)[1]}{counts[st]}" for st in present)
    style = palette.style(present[0]) if present else ""
    return f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}: {text}", style


def node_cells(state: EngineState, n: int, depth: int, highlight: bool,
               palette: Palette = ANSI) -> Row:
    """A node's row inside its group: the list view's columns, the name indented."""
    info = state.nodes[n]
    st, where, rem = render.node_status(state, n)
    style, badge = palette.state(st)
    name = f"{' ' * (INDENT * depth)}#{n} {badge} {info.name}"
    return cells((name, ("bold reverse " + style) if highlight else style), info.device,
                 (st.replace("_", " "), style), rem, seq_text(info.seq), where)
