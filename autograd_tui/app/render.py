"""Text renderings of an ``EngineState`` (pure functions: state in, Rich text out).

Shared by the app's panes and by tests; none of them looks at the engine.  Nodes,
sequence numbers and values are named by ``autograd_tui.words``, as in every other view.
"""

from __future__ import annotations

import heapq
import re
from typing import Any

from rich.text import Text

from autograd_tui.app import graph_draw
from autograd_tui.app.theme import ANSI, BADGES, Palette
from autograd_tui.engine.graph import UINT64_MAX
from autograd_tui.history.state import EngineState, shown
from autograd_tui.words import (
    node_label,
    plain,
    seq_text,
    short_value,
    value_summary,
    wait_words,
)

#: state -> (style, one-letter badge) without a theme (the app draws with its theme's
#: ``theme.Palette``); the letter keeps meaning without colour
STATE_STYLE = {st: ANSI.state(st) for st in BADGES}
BOX_WIDTH = graph_draw.BOX_WIDTH
node_status = graph_draw.node_status


def label_of(state: EngineState, node: int | None) -> str:
    """``MulBackward0#3``; the node of a dummy (wake-up) task is "dummy"."""
    return node_label(state.node_name(node), node, none="dummy")


def report_field(report: Any, name: str, default: Any = None) -> Any:
    """A field of a deadlock or pause report: an object in a live run, a dict (the
    deadlock event's data) in a recording."""
    if hasattr(report, name):
        return getattr(report, name)
    return report.get(name, default) if isinstance(report, dict) else default


def graph_text(state: EngineState, highlight: int | None = None, width: int = BOX_WIDTH,
               palette: Palette = ANSI, forward: graph_draw.Forward | None = None) -> Text:
    """The graph: a framed group of boxes in layers per GraphTask (``graph_draw``)."""
    return Text("\n").join(graph_lines(state, highlight, width, palette, forward))


def graph_lines(state: EngineState, highlight: int | None = None, width: int = BOX_WIDTH,
                palette: Palette = ANSI, forward: graph_draw.Forward | None = None
                ) -> list[Text]:
    """``graph_text``'s lines (kept while nothing in them changes: callers must not
    modify them)."""
    return graph_draw.draw(state, highlight, width, palette, forward).lines


def list_rows(state: EngineState) -> list[tuple[str, ...]]:
    """One row per node in topological order: the compact view for large graphs."""
    return [list_row(state, n) for n in state.topological_order()]


def list_row(state: EngineState, n: int) -> tuple[str, ...]:
    """Node ``n``'s row in the list view: id, badge and name, device, state, deps, seq,
    where."""
    info = state.nodes[n]
    st, where, rem = node_status(state, n)
    _, badge = STATE_STYLE.get(st, ("", "?"))
    return (str(n), f"{badge} {info.name}", info.device, st.replace("_", " "), rem,
            seq_text(info.seq), where)


def list_widths(state: EngineState) -> list[int]:
    """Column widths that fit every row of ``list_rows`` without making the rows: for a
    graph too large to show all at once (its rows are made as they scroll into view).
    No string is made per node (a 117,390-node graph's widths took 0.27 s that way): an
    int's sequence number is as wide as the largest or the smallest of them."""
    nodes = state.nodes.values()
    names = max(map(len, [x.name for x in nodes]), default=0)
    devices = max(map(len, {x.device for x in nodes}), default=0)
    ints = [x.seq for x in nodes if type(x.seq) is int and x.seq < UINT64_MAX]
    others = {x.seq for x in nodes if type(x.seq) is not int or x.seq >= UINT64_MAX}
    seqs = max([len(str(max(ints))), len(str(min(ints)))] if ints else [0])
    seqs = max([seqs, *map(len, map(seq_text, others))])
    ids = max((len(str(n)) for n in (max(state.nodes), min(state.nodes))), default=0) \
        if state.nodes else 0
    wheres = max((len(w) for w in (*state.heaps, *state.threads)), default=0)
    deps = max((len(str(v)) for v in (max(state.dependencies.values()),
                                      min(state.dependencies.values()))), default=1) \
        if state.dependencies else 1
    return [max(2, ids), 2 + names, max(6, devices), len("not reached"), max(4, deps),
            max(3, seqs), max(5, wheres)]


PANE_ITEMS = 50  # entries a side pane lists (a recording may have thousands): the rest


def _more(t: Text, n: int, what: str) -> None:
    """The line that stands for the ``n`` entries a pane does not list."""
    if n > 0:
        t.append(f"\n… and {n:,} more {what}", style="dim")


def queues_text(state: EngineState) -> Text:
    t = Text()
    if not state.heaps:
        return Text("(no queue yet)", style="dim")
    for i, q in enumerate(sorted(state.heaps)):
        if i:
            t.append("\n")
        n = state.queue_len(q)
        t.append(plain(q), style="bold")
        t.append(f" ({n})  ")
        if not n:
            t.append("empty", style="dim")
        for k, task in enumerate(state.queue_order(q, PANE_ITEMS)):
            if k:
                t.append(" ← ", style="dim")
            name = label_of(state, task.node)
            t.append(name, style="green" if task.node is not None else "bold blue")
            t.append(f" d{task.depth} s{seq_text(task.seq) if task.seq is not None else '-'}",
                     style="dim")
        if n > PANE_ITEMS:
            t.append(f" ← … {n - PANE_ITEMS:,} more", style="dim")
    return t


def not_ready_text(state: EngineState, values: bool = True) -> Text:
    if not state.not_ready:
        return Text("(empty)", style="dim")
    t = Text()
    entries = heapq.nsmallest(PANE_ITEMS, state.not_ready.items(),
                              key=lambda kv: (kv[0][0] or 0, kv[0][1]))
    for i, ((gt, n), slots) in enumerate(entries):
        if i:
            t.append("\n")
        t.append(label_of(state, n), style="bold magenta")
        rem = state.dependencies.get((gt, n))
        t.append(f" GT{gt} deps {rem}: ")
        first, more = shown(slots)
        for k, s in first:
            if k:
                t.append("  ")
            if s is None:
                t.append(f"[{k}] empty", style="dim")
            else:
                t.append(f"[{k}] " + (short_value(s) if values else "filled"))
        if more:
            t.append(f"  … {more:,} more", style="dim")
    _more(t, len(state.not_ready) - PANE_ITEMS, "in not_ready")
    return t


def graph_tasks_text(state: EngineState) -> Text:
    if not state.graph_tasks:
        return Text("(none yet)", style="dim")
    t = Text()
    gts = sorted(state.graph_tasks.values(), key=lambda g: g.id)
    if len(gts) > PANE_ITEMS:  # the most recent ones
        t.append(f"… {len(gts) - PANE_ITEMS:,} earlier GraphTasks\n", style="dim")
        gts = gts[-PANE_ITEMS:]
    for i, gt in enumerate(gts):
        if i:
            t.append("\n")
        status = ("error: " + gt.error) if gt.error else ("completed" if gt.completed
                                                          else "running")
        style = "bold red" if gt.error else ("blue" if gt.completed else "bold")
        t.append(f"GT{gt.id}", style="bold")
        t.append(plain(f" owner {gt.owner} depth {gt.reentrant_depth} "
                       f"outstanding {gt.outstanding} "))
        t.append(plain(status), style=style)
        if gt.handoff:
            t.append(plain(f" ({gt.handoff} from GT{gt.parent})"), style="dim")
    if state.leaf_grads:  # each AccumulateGrad's leaf, as it is written
        t.append("\nleaf .grad", style="bold")
        for n in heapq.nsmallest(PANE_ITEMS, state.leaf_grads):  # not a sort of thousands
            t.append(f"  #{n}=", style="dim")
            t.append(short_value(state.leaf_grads[n]), style="blue")
        if len(state.leaf_grads) > PANE_ITEMS:
            t.append(f"  … and {len(state.leaf_grads) - PANE_ITEMS:,} more", style="dim")
    return t


def threads_rows(state: EngineState, live: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(thread, state, current node, depth) per thread, in the fold's words: the same at an
    event whether it is the live run's newest or one gone back to (at event 33 the live
    pane said "at a gate after not_ready_insert", after ``g 33`` "running").  Live, the
    controller adds what no event says: a thread the user paused, the numbering of
    threads not yet seen by an event."""
    names = list(dict.fromkeys([*live, *state.threads]))  # live: the controller's numbering
    rows = []
    for name in names:
        ls = live.get(name)
        fs = state.threads.get(name)
        if fs is None:
            what = ls.detail if ls is not None else "?"
            rows.append((name, what, ls.node or "" if ls is not None else "", "0"))
            continue
        what = fs.state + (f" on {wait_words(*fs.waiting_on)}" if fs.waiting_on else "")
        if ls is not None and ls.user_paused:
            what += ", paused (p resumes)"
        node = label_of(state, fs.node) if fs.node is not None else ""
        rows.append((name, what, node, str(fs.depth)))
    return rows


def node_details(state: EngineState, n: int, values: bool = True,
                 forward: graph_draw.Forward | None = None, frames: bool = False) -> Text:
    """Everything known of node ``n``; its name whole (a box may cut it) and the forward
    op it came from (``graph_draw.forward_labels``); ``frames``: every frame of that op
    (a PyTorch node's ``node_meta.stack``), not only the program's own."""
    info = state.nodes.get(n)
    if info is None:
        return Text("Select a node (click a row of the list view, or an event).", style="dim")
    st, where, rem = node_status(state, n)
    t = Text()
    t.append(plain(f"{info.name} #{n}"), style="bold")
    label = graph_draw.cached_labels(state, forward).get(n)
    if label:
        t.append(plain(f"   from {label}"))
    gid = state.node_states[n].graph_task if n in state.node_states else None
    t.append(f"   GraphTask {gid}\n" if gid is not None else "\n")
    t.append(plain(f"device {info.device}   sequence_nr {seq_text(info.seq)}   "
                   f"topological_nr {info.topo}   inputs {info.num_inputs}") + "\n")
    t.append(plain(f"state {st}{' @ ' + where if where else ''}   remaining dependencies "
                   f"{rem}") + "\n")
    t.append("next edges: ")
    t.append(", ".join(f"{label_of(state, c)} (input {i})" if c is not None else "none"
                       for c, i in info.next) or "(none: a leaf)")
    t.append("\n")
    for (gt, node), slots in state.buffers.items():
        if node == n:
            first, more = shown(slots)
            t.append(f"input buffer (GT{gt}): " + "  ".join(
                f"[{k}] {short_value(s) if s is not None else 'empty'}"
                for k, s in first) + (f"  … {more:,} more" if more else "") + "\n")
    outs = value_summary(state.outputs.get(n), many=True)
    if outs is not None:
        t.append("output gradients: " + ", ".join(short_value(o) for o in outs) + "\n")
    if n in state.leaf_grads:
        t.append(f"leaf .grad: {short_value(state.leaf_grads[n])}\n")
    _torch_meta(t, state.node_meta.get(n), frames)
    if values:
        for label, summ in (("outputs", outs or ()),):
            for k, s in enumerate(summ):
                if s is not None and "data" in s:
                    t.append(plain(f"{label}[{k}] = {s['data']}") + "\n")
    return t


def _torch_meta(t: Text, meta: Any, frames: bool = False) -> None:
    """A PyTorch node's facts (``node_meta``): its module, where it was made (the program's
    own frame; ``frames``: every frame, library ones too), what it saved, each tensor with
    its size.  Every string may come from a recording: shown as text, checked for type."""
    if not isinstance(meta, dict):
        return
    def text(key: str) -> str | None:
        v = meta.get(key)
        return v if isinstance(v, str) else None

    if text("module"):
        t.append(plain(f"module: {text('module')} ({text('module_type') or '?'})") + "\n")
    if text("tensor"):
        kind = "parameter" if text("module") else "leaf"  # a leaf the program made: no module
        t.append(plain(f"{kind}: {text('tensor')}") + "\n")
    stack = [f for f in meta.get("stack") or () if isinstance(f, str)]
    if text("created"):
        t.append(plain(f"created at {text('created')}") + "\n", style="dim")
        if text("source"):
            t.append(plain(f"    {text('source')}") + "\n")
    if stack and frames:
        t.append(f"forward stack ({len(stack)} frames, outermost first; F hides):\n")
        for f in stack:
            own = f == text("created")
            t.append(plain(f"  {'>' if own else ' '} {f}") + "\n", style="" if own else "dim")
    elif stack:
        t.append(f"F: every frame of the forward op ({len(stack)}, library ones too)\n",
                 style="dim")
    saved = meta.get("saved")
    if isinstance(saved, list) and saved:
        t.append(f"saved tensors ({len(saved)}):\n")
        for line in saved:
            t.append(plain(f"  {saved_line(line)}") + "\n")


_UNSIGNED = re.compile(r"^(\w+): (\d{19,20})$")  # an int the bridge read from PyTorch
_TENSOR = re.compile(r"Tensor\[([\d, ]*)\] ([a-z]+\d*)")
_HAS_SIZE = re.compile(r"\bsize\b|\d B\b|\d [KMG]iB\b")  # "648 B", "1.5 KiB" (the bridge's)
_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
          "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16}


def saved_line(line: object) -> str:
    """A saved tensor's line (``node_meta.saved``) with its size in memory, worked out from
    its shape and dtype where the line gives them and not a size already."""
    text = str(line)
    u = _UNSIGNED.match(text)
    if u is not None and 2**63 <= int(u.group(2)) < 2**64:
        # PyTorch's _saved_* getter of an int64 reads it as unsigned (-100 gives
        # 18446744073709551516): the value the op saved, and what PyTorch's getter says
        return (f"{u.group(1)}: {int(u.group(2)) - 2**64} (PyTorch's _saved_{u.group(1)} "
                f"reads {u.group(2)}: the int64 as unsigned)")
    m = _TENSOR.search(text)
    if m is None or _HAS_SIZE.search(text) or m.group(2) not in _BYTES:
        return text
    n = 1
    for d in m.group(1).split(","):
        n *= int(d) if d.strip() else 1
    size = n * _BYTES[m.group(2)]
    unit = next((u for u, b in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
                 if size >= b), "B")
    amount = size / {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10, "B": 1}[unit]
    return f"{text}, size {amount:.3g} {unit}" if unit != "B" else f"{text}, size {size} B"
