"""The graph pane's boxes view: each GraphTask a framed group of boxes in layers.

Pure: an ``EngineState`` in, Rich lines out (with where each node's box is, so that the
pane can scroll to it).  A node belongs to the GraphTask that last counted its
dependencies (``NodeState.graph_task``: a second backward over a retained graph takes
its nodes).  Groups come in the order their GraphTasks were created (the
``graph_task_created`` events, ``GraphTaskState.created``); a reentrant GraphTask is drawn
inside its parent's frame, below the parent's own boxes.  A name too long for its box or
frame (widened where the pane has room) ends with "…"; the node's details have it whole.

Most steps change a box or two: boxes, rows and groups are kept while nothing in them
changes, the same objects for the pane (``TextView`` redraws only the lines that differ).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from rich.cells import cell_len, set_cell_size
from rich.text import Text

from autograd_tui.app.theme import ANSI, Palette
from autograd_tui.history.state import EngineState, GraphTaskState, NodeInfo, NodeState
from autograd_tui.words import plain, seq_text

# 20 wide, one space apart: three boxes fit the graph pane of a 120-column terminal (with
# 24 and two spaces, linear-relu's Linear1 was cut off); wider where names need (draw).
BOX_WIDTH, MAX_WIDE = 20, 34
NO_TASK = -1  # the group of nodes whose GraphTask the state does not know
Forward = Mapping[int, tuple[str, ...]]  # a scenario's FORWARD: sequence_nr -> names
_NOT_REACHED = NodeState("not_reached")


def ellipsize(s: str, width: int) -> str:
    """``s`` cut to ``width`` cells, its last one "…" when something was cut."""
    if cell_len(s) <= width:
        return s
    return set_cell_size(s, max(width - 1, 0)) + "…" if width > 0 else ""


def node_status(state: EngineState, n: int) -> tuple[str, str, str]:
    """(state, where, remaining-deps text) for node ``n``."""
    ns = state.node_states.get(n)
    st = ns.state if ns else "not_reached"
    where = (ns.where or "") if ns else ""
    rem = state.remaining(n)
    return st, where, "-" if rem is None else str(rem)


# --- forward ops --------------------------------------------------------------------------
def forward_labels(state: EngineState, forward: Forward | None = None) -> dict[int, str]:
    """Node -> the forward op (or leaf) it came from, where something names it: the
    scenario's ``FORWARD`` (by sequence_nr; the leaves of a named op's inputs by its
    edges), or a PyTorch graph's ``node_meta`` (a parameter's name for an
    AccumulateGrad, else the module).  Strings from a recording are checked."""
    out: dict[int, str] = {}
    if forward:
        for n, info in state.nodes.items():
            names = forward.get(info.seq) if not info.leaf else None
            if not names:
                continue
            out[n] = names[0]
            for (child, _), leaf in zip(info.next, names[1:]):
                c = state.nodes.get(child) if child is not None else None
                if leaf and c is not None and c.leaf:
                    out[child] = leaf  # type: ignore[index]
    for n, meta in state.node_meta.items():
        if not isinstance(meta, dict) or n in out:
            continue
        tensor, module, typ = meta.get("tensor"), meta.get("module"), meta.get("module_type")
        if isinstance(tensor, str) and tensor:
            out[n] = tensor
        elif isinstance(module, str) and module:
            out[n] = f"{module}: {typ}" if isinstance(typ, str) and typ else module
    return out


_LABELS: list[Any] = [None, None, None]  # the last (key, forward, labels)


def cached_labels(state: EngineState, forward: Forward | None) -> dict[int, str]:
    """``forward_labels``, made again only when the graph, its node_meta or ``forward``
    changes (the pane asks at every step)."""
    key = (len(state.nodes), next(reversed(state.nodes), None), len(state.node_meta))
    if _LABELS[0] != key or _LABELS[1] is not forward:
        _LABELS[:] = [key, forward, forward_labels(state, forward)]
    return _LABELS[2]  # type: ignore[no-any-return]


# --- groups ---------------------------------------------------------------------------------
class Group(NamedTuple):
    """One GraphTask's nodes in layers, and the reentrant GraphTasks it started."""

    gid: int
    title: str
    error: bool
    layers: list[list[int]]
    children: list[Group]
    note: str  # shown when it has no node of its own


def pool_threads(state: EngineState) -> dict[int, str]:
    """GraphTask -> the pool thread that runs it (``handoff`` pool), as far as the state
    tells: a thread running one of its nodes, or where it started a nested GraphTask."""
    out: dict[int, str] = {}
    for name, th in state.threads.items():
        for g, _ in th.nodes:
            if g is not None:
                out.setdefault(g, name)
    by_parent: dict[int, str] = {}
    for other in state.graph_tasks.values():
        parent = state.graph_tasks.get(other.parent) if other.parent is not None else None
        if parent is not None and other.owner != parent.owner:
            by_parent.setdefault(parent.id, other.owner)
    return {**by_parent, **out}


def runner(state: EngineState, gt: GraphTaskState,
           pools: dict[int, str] | None = None) -> str | None:
    """The thread that runs ``gt``'s nodes: its owner, or the pool thread (None: unknown)."""
    if gt.handoff != "pool":
        return gt.owner
    return (pools if pools is not None else pool_threads(state)).get(gt.id)


def task_title(state: EngineState, gt: GraphTaskState, pools: set[str],
               runs: dict[int, str] | None = None) -> str:
    """``GraphTask 4 · nested in 3 · pool thread reentrant-pool-1 · running``: the thread
    is left out where it is the parent's."""
    parts = [f"GraphTask {gt.id}"]
    thread = runner(state, gt, runs)
    parent = state.graph_tasks.get(gt.parent) if gt.parent is not None else None
    if gt.parent is not None:
        parts.append(f"nested in {gt.parent}" + (" (blocking)" if gt.handoff == "block"
                                                 else ""))
    if thread is None:
        parts.append("handed to the reentrant pool")
    elif parent is None or runner(state, parent, runs) != thread:
        parts.append(f"pool thread {thread}" if thread in pools else thread)
    parts.append("error" if gt.error else "completed" if gt.completed else "running")
    return plain(" · ".join(parts))


#: frames nested deeper are drawn at the top level (titled "nested in N"): a frame copies
#: the lines inside it, so nesting without end was cubic in the depth (and recursive)
MAX_NEST = 6


def groups(state: EngineState) -> list[Group]:
    """The GraphTasks as a forest in creation order, each with its nodes in layers."""
    members: dict[int, list[int]] = {}
    for n in state.nodes:
        gid = state.node_states.get(n, _NOT_REACHED).graph_task
        members.setdefault(gid if gid in state.graph_tasks else NO_TASK, []).append(n)
    tasks = sorted(state.graph_tasks.values(), key=lambda g: (g.created, g.id))
    runs = pool_threads(state)
    pools = {r for g in tasks if g.handoff == "pool" and (r := runs.get(g.id))}
    made: dict[int, Group] = {}
    level: dict[int, int] = {}
    top: list[Group] = []
    for gt in tasks:
        own = members.get(gt.id, [])
        note = ""
        if not own:  # its graph is not counted yet, or a later GraphTask took it
            root = state.node_states.get(gt.graph_root)
            later = state.graph_tasks.get(root.graph_task) if root is not None else None
            note = (f"(its nodes are in GraphTask {later.id} now: it counted them again)"
                    if later is not None and (later.created, later.id) > (gt.created, gt.id)
                    else "(no graph yet: dependencies_computed is next)")
        g = made[gt.id] = Group(gt.id, task_title(state, gt, pools, runs),
                                gt.error is not None, layers_of(state, own), [], note)
        parent = made.get(gt.parent) if gt.parent is not None else None
        level[gt.id] = level[parent.gid] + 1 if parent is not None else 0
        if level[gt.id] > MAX_NEST:
            parent, level[gt.id] = None, 0
        (parent.children if parent is not None else top).append(g)
    if NO_TASK in members:
        top.append(Group(NO_TASK, "nodes of no known GraphTask", False,
                         layers_of(state, members[NO_TASK]), [], ""))
    return top


def layers_of(state: EngineState, nodes: list[int]) -> list[list[int]]:
    """``nodes`` in layers from the roots (top) to the leaves, each by sequence number
    (highest first): a node's layer is its longest path from a root, by edges inside
    ``nodes``.  Edges go down in topological_nr (the fold checks it), so one pass in
    that order finds them."""
    info = state.nodes
    mine = set(nodes)
    depth = dict.fromkeys(nodes, 0)
    for n in sorted(nodes, key=lambda n: -info[n].topo):
        d = depth[n] + 1
        for child, _ in info[n].next:
            if child in mine and depth[child] < d:  # type: ignore[operator]
                depth[child] = d  # type: ignore[index]
    out: dict[int, list[int]] = {}
    for n, d in depth.items():
        out.setdefault(d, []).append(n)
    return [sorted(out[d], key=lambda n: (-info[n].seq, n)) for d in sorted(out)]


# --- boxes ----------------------------------------------------------------------------------
#: (node info, status, highlight, width, label, tall, palette) -> the box's lines
_BOXES: dict[tuple[Any, ...], list[Text]] = {}


def box(state: EngineState, n: int, highlight: bool, width: int, label: str | None,
        tall: bool, palette: Palette) -> list[Text]:
    """The box of node ``n`` (callers must not modify its lines): the badge and name in
    the top border, the forward op (a row of its own where some box of the layer has
    one: ``tall``), id/device/seq, deps/state/where, and the next edges in the bottom
    border."""
    info: NodeInfo = state.nodes[n]
    status = node_status(state, n)
    key = (n, info, *status, highlight, width, label, tall, palette)
    try:
        lines = _BOXES.get(key)
    except TypeError:  # an unhashable NodeInfo (a bad recording): draw it every time
        return _draw_box(n, info, status, highlight, width, label, tall, palette)
    if lines is None:
        if len(_BOXES) > 8192:
            _BOXES.clear()
        lines = _BOXES[key] = _draw_box(n, info, status, highlight, width, label, tall,
                                        palette)
    return lines


def _draw_box(n: int, info: NodeInfo, status: tuple[str, str, str], highlight: bool,
              width: int, label: str | None, tall: bool, palette: Palette) -> list[Text]:
    st, where, rem = status
    style, badge = palette.state(st)
    border = "bold reverse " + style if highlight else style
    inner = width - 2
    name = plain(info.name)
    title = f" {badge} {name} "
    if cell_len(title) > inner:  # the closing space goes, then (focused) the badge, the end
        title = ellipsize(f" {name}" if highlight and len(title) > inner + 1 else title[:-1],
                          inner)
    body = [f"({plain(label)})" if label else ""] if tall else []
    body += [f"#{n} {plain(info.device)} seq {seq_text(info.seq)}",
             f"deps {rem} {st.replace('_', ' ')}" + (f" @{plain(where)}" if where else "")]
    edges = " → " + " ".join(f"#{c}.{i}" for c, i in info.next if c is not None) + " " \
        if info.next else " leaf "
    edges = ellipsize(edges[:-1], inner) if cell_len(edges) > inner else edges
    top = Text("╭", style=border)
    top.append(title, style=border + " bold")
    top.append("─" * (inner - cell_len(title)) + "╮", style=border)
    out = [top]
    for line in body:
        t = Text("│", style=border)
        t.append(set_cell_size(ellipsize(line, inner), inner))
        t.append("│", style=border)
        out.append(t)
    out.append(Text("╰" + edges + "─" * (inner - cell_len(edges)) + "╯", style=border))
    return out


# --- the drawing ----------------------------------------------------------------------------
Place = tuple[int, int, int]  # (line, column, height) of a box or a frame


class Block(NamedTuple):
    """Lines and where each node's box (``where``) and GraphTask's frame (``tasks``) is
    in them."""

    lines: list[Text]
    where: dict[int, Place]
    width: int
    tasks: dict[int, Place] | None = None


#: (layer depth, ids of its boxes) -> (those boxes, the row's block); the entry holds
#: the boxes, so their ids cannot be reused while it lives
_ROWS: dict[tuple[int, ...], tuple[list[list[Text]], Block]] = {}
#: (title, error, note, palette, width, ids of the rows and child blocks) -> (them, the
#: framed block), for the frames of the last drawing only (``_USED``: this one's): a
#: frame holds a copy of every line inside it, and thousands kept made the garbage
#: collector's full passes take 0.2-0.4 s; a step reuses the frames that did not change
#: since the step before
_USED: dict[tuple[Any, ...], tuple[list[Block], Block]] = {}
_FRAMES: dict[tuple[Any, ...], tuple[list[Block], Block]] = {}


def _row(depth: int, layer: list[int], boxes: list[list[Text]], width: int) -> Block:
    key = (depth, *map(id, boxes))  # an unchanged box is the same (cached) list
    hit = _ROWS.get(key)
    if hit is None:
        lines = []
        for r in range(len(boxes[0])):
            line = Text(f"{depth:>2} " if r == 0 else "   ", style="dim")
            for i, b in enumerate(boxes):
                if i:
                    line.append(" ")
                line.append_text(b[r])
            lines.append(line)
        where = {n: (0, 3 + i * (width + 1), len(boxes[0])) for i, n in enumerate(layer)}
        if len(_ROWS) > 4096:
            _ROWS.clear()
        hit = _ROWS[key] = (boxes, Block(lines, where, 3 + len(boxes) * (width + 1) - 1))
    return hit[1]


def _need(g: Group, width: int, titles: bool, level: int = 0) -> int:
    """How wide the frames must be at the top level for ``g`` (at ``level``) to show all
    of its boxes (and ``titles``: its title whole): each level of nesting takes 4 columns
    (two borders, two spaces)."""
    # a note ("no graph yet") is cut, as a title is
    rows = max((3 + len(layer) * (width + 1) - 1 for layer in g.layers), default=width)
    own = max(rows + 2, cell_len(g.title) + 5 if titles else 0)
    return max([own + NEST * level] + [_need(c, width, titles, level + 1)
                                       for c in g.children])


NEST = 4  # columns a nested frame gives up: its borders and a space each side


def _group(state: EngineState, g: Group, highlight: int | None, width: int,
           labels: dict[int, str], palette: Palette, outer: int) -> Block:
    parts = []
    for depth, layer in enumerate(g.layers):
        tall = any(n in labels for n in layer)
        boxes = [box(state, n, n == highlight, width, labels.get(n), tall, palette)
                 for n in layer]
        parts.append(_row(depth, layer, boxes, width))
    parts += [_group(state, c, highlight, width, labels, palette, outer - NEST)
              for c in g.children]
    key = (g.title, g.error, g.note, palette, outer, *map(id, parts))
    hit = _FRAMES.get(key) or _USED.get(key)
    if hit is None:
        hit = (parts, _frame(g, parts, len(g.layers), palette, outer))
    _USED[key] = hit
    return hit[1]


def _frame(g: Group, parts: list[Block], rows: int, palette: Palette, outer: int) -> Block:
    """The parts in a frame ``outer`` wide, titled with the GraphTask; the nested groups
    (the parts after the first ``rows``) one space in from each border."""
    inner = outer - 2
    note = Text(ellipsize(g.note, inner), style="italic") if g.note and not rows else None
    title = ellipsize(g.title, inner - 3)
    frame = palette.frame
    top = Text("╭─", style=frame)
    top.append(f" {title} ", style=palette.style("errored") if g.error else palette.title)
    top.append("─" * (inner - cell_len(title) - 3) + "╮", style=frame)
    lines, where = [top], {}
    tasks: dict[int, Place] = {}
    body = [(Block([note], {}, note.cell_len), 0)] if note else []
    body += [(p, 1 if i >= rows else 0) for i, p in enumerate(parts)]
    for part, indent in body:
        for n, (y, x, h) in part.where.items():
            where[n] = (len(lines) + y, 1 + indent + x, h)
        for gid, (y, x, h) in (part.tasks or {}).items():
            tasks[gid] = (len(lines) + y, 1 + indent + x, h)
        for line in part.lines:
            t = Text("│", style=frame)
            if indent:
                t.append(" ")
            t.append_text(line)
            t.append(" " * (inner - indent - line.cell_len))
            t.append("│", style=frame)
            lines.append(t)
    lines.append(Text("╰" + "─" * inner + "╯", style=frame))
    tasks[g.gid] = (0, 0, len(lines))
    return Block(lines, where, outer, tasks)


NO_GRAPH = "No graph yet: step on (., n, or right) until dependencies_computed."


def draw(state: EngineState, highlight: int | None = None, width: int = BOX_WIDTH,
         palette: Palette = ANSI, forward: Forward | None = None, fill: int = 0) -> Block:
    """The whole graph: a framed group per GraphTask, one after another, the frames
    ``fill`` wide (the pane's width: a title too long for it ends with "…") or, without
    ``fill``, as wide as the widest box and title need."""
    if not state.graph_tasks and not state.nodes:
        return Block([Text(NO_GRAPH, style="italic")], {}, len(NO_GRAPH))
    labels = cached_labels(state, forward)
    lines: list[Text] = []
    where: dict[int, Place] = {}
    tasks: dict[int, Place] = {}
    widest = 0
    forest = groups(state)
    # boxes that hold every whole name (SigmoidBackward0), if the pane has the room
    wide = min(max((len(i.name) for i in state.nodes.values()), default=0) + 6, MAX_WIDE)
    if fill and wide > width and all(_need(g, wide, False) <= fill for g in forest):
        width = wide
    outer = max([fill] + [_need(g, width, not fill) for g in forest])
    global _FRAMES, _USED
    _USED = {}
    for g in forest:
        b = _group(state, g, highlight, width, labels, palette, outer)
        for n, (y, x, h) in b.where.items():
            where[n] = (len(lines) + y, x, h)
        for gid, (y, x, h) in (b.tasks or {}).items():
            tasks[gid] = (len(lines) + y, x, h)
        lines.extend(b.lines)
        widest = max(widest, b.width)
    _FRAMES = _USED
    return Block(lines, where, widest, tasks)
