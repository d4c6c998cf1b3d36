"""Graphviz snapshots of an ``EngineState``: DOT text, rendering, frame indexes.

Not in PyTorch.  ``to_dot(state)`` draws one moment of a backward pass from
the ``EngineState`` alone (it never looks at the engine, the controller or the
events other than ``state.last_event``):

* one node per backward node, an HTML-like table ("record") with its name and
  id, device, sequence number (AccumulateGrad's ``2**64 - 1`` is shown as
  ``max``), GraphTask, state and remaining dependencies, and, while it waits in
  ``not_ready``, its InputBuffer slots (filled, with short values, or empty);
  filled with the colour of its state (``STATE_STYLE``, drawn as a legend);
* one edge per next edge, in the direction the gradient flows, labelled with
  the input number it feeds; the edge whose gradient just flowed (the last
  event's ``from_node -> node``, for ``dependency_decrement`` and
  ``buffer_accumulate``) is bold and blue;
* one cluster per device;
* with ``collapse_leaves``, the AccumulateGrad leaves of each device in one
  node (a grid); the edges into them are not drawn (edges from all over the
  graph into one node make ``dot`` very slow on large graphs) but listed: each
  parent says ``→ leaves #7, #8`` and each leaf ``from #5``;
* a side table with the ready queues (in pop order), the GraphTasks and the
  threads;
* when ``state.deadlock`` is set, the wait-for cycle in red, linked to the
  node each waiting thread is inside and to the task each queue holds.

The output is deterministic: everything is sorted, no addresses, no times.
Graph nodes have stable ids (``n12`` for node 12) that the SVG keeps.

``render(dot_source, fmt)`` runs Graphviz ``dot`` (a subprocess with a
timeout); ``index_html(frames)`` writes the page that steps through a frame
sequence with the arrow keys.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autograd_tui.engine.events import Event
from autograd_tui.engine.events import summary as plain_summary
from autograd_tui.history.fold import apply
from autograd_tui.history.state import EngineState, NodeInfo, NodeState, QueueTask
from autograd_tui.words import format_event, short_value

#: output formats; every one but ``dot`` is rendered by Graphviz ``dot``
FORMATS = ("dot", "svg", "png", "pdf")
RANKDIRS = ("TB", "LR")

#: AccumulateGrad's sequence number
SEQ_MAX = 2**64 - 1

#: node state -> (fill colour, legend text)
STATE_STYLE: dict[str, tuple[str, str]] = {
    "not_reached": ("#f1f3f5", "no gradient has arrived yet"),
    "not_ready": ("#ffd8a8", "some inputs arrived; its InputBuffer waits in not_ready"),
    "ready": ("#a5d8ff", "all inputs arrived; in a ready queue"),
    "running": ("#ffe066", "running on a thread"),
    "done": ("#b2f2bb", "ran; its gradients went on"),
    "skipped": ("#ced4da", "not run (not needed, captured, or after an error)"),
    "errored": ("#ff8787", "raised an error"),
}
FLOW_COLOR = "#1864ab"  # the edge whose gradient just flowed
DEADLOCK_COLOR = "#e03131"
EDGE_COLOR = "#495057"
CLUSTER_COLOR = "#868e96"
SLOT_FILLED = "#fff4e6"
SLOT_EMPTY = "#ffffff"

#: event kinds ``--breakpoints`` writes a frame at
BREAKPOINT_KINDS = ("node_start", "not_ready_insert", "completion", "deadlock")

FONT = "Helvetica"
MAX_TITLE = 180


class ExportError(Exception):
    """An export that cannot be done: one clear message."""


class DotNotFound(ExportError):
    """Graphviz ``dot`` is not on PATH."""


class RenderError(ExportError):
    """``dot`` failed or timed out."""


INSTALL_HINT = ("install Graphviz: `sudo apt-get install graphviz` (Debian/Ubuntu), "
                "`brew install graphviz` (macOS), or see https://graphviz.org/download/")


# --- quoting ----------------------------------------------------------------------------------
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _h(text: Any) -> str:
    """Escape text for an HTML-like label."""
    s = _CONTROL.sub("", str(text))
    return (s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("\n", " "))


def _q(text: Any) -> str:
    """A DOT double-quoted string (also an escString: backslashes are doubled)."""
    s = _CONTROL.sub("", str(text)).replace("\n", " ")
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Html(str):
    """An HTML-like label, written as ``<...>`` (the text inside the outer brackets)."""


def _attrs(**kw: Any) -> str:
    """``[k=v, ...]`` in the given order (``Html`` values become ``<...>`` labels)."""
    parts = []
    for k, v in kw.items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = "true" if v else "false"
        if isinstance(v, Html):
            parts.append(f"{k}=<{v}>")
        elif isinstance(v, (int, float)):
            parts.append(f"{k}={v}")
        else:
            parts.append(f"{k}={_q(v)}")
    return "[" + ", ".join(parts) + "]"


def _ident(text: str) -> str:
    """A safe DOT identifier fragment (devices like ``cuda:0`` -> ``cuda_0``)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


# --- small formatting ---------------------------------------------------------------------------
def fmt_seq(seq: int | None) -> str:
    if seq is None:
        return "-"
    return "max" if seq == SEQ_MAX else str(seq)


def _fmt_depth(depth: int) -> str:
    return "max" if depth >= 2**31 - 1 else str(depth)


def _shape(summary: dict[str, Any]) -> str:
    shape = summary.get("shape") or []
    return "×".join(str(d) for d in shape) if shape else "scalar"


def slot_text(summary: dict[str, Any] | None, values: bool = True) -> str:
    """One InputBuffer slot: ``empty``, ``[0.7]`` or (without values) ``filled 2×3``."""
    summary = plain_summary(summary)
    if summary is None:
        return "empty"
    if not values:
        return f"filled {_shape(summary)}"
    try:
        return short_value(summary)
    except (KeyError, TypeError, ValueError):
        return "filled"


def _trunc(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _names(state: EngineState) -> dict[int, str]:
    return {i: info.name for i, info in state.nodes.items()}


def event_text(state: EngineState, event: Event | None = None) -> str:
    """The last event (or ``event``), in one line: ``event 32 · cpu (owner) · GT1 · ...``."""
    e = event if event is not None else state.last_event
    if e is None:
        return "no events yet"
    if e.kind == "deadlock":
        cycle = " → ".join(str(c) for c in (e.data.get("cycle") or ()))
        body = f"deadlock: {cycle}" if cycle else "deadlock"
    else:
        where = f"GT{e.graph_task}" if e.graph_task is not None else ""
        line = format_event(e, _names(state))
        prefix = f"{e.seq:5d} {e.thread:<18} {where:<5} "
        body = line[len(prefix):] if line.startswith(prefix) else " ".join(line.split())
    parts = [f"event {e.seq}", e.thread]
    if e.graph_task is not None:
        parts.append(f"GT{e.graph_task}")
    parts.append(body.strip())
    return " · ".join(parts)


# --- the DOT writer ---------------------------------------------------------------------------
@dataclass(frozen=True)
class DotOptions:
    rankdir: str = "TB"
    values: bool = True
    collapse_leaves: bool = False
    title: str | None = None


def _flow_edge(state: EngineState) -> tuple[int, int, int] | None:
    """(from_node, node, input_nr) of the gradient that just flowed, if the last event says."""
    e = state.last_event
    if e is None or e.node is None or e.kind not in ("dependency_decrement", "buffer_accumulate"):
        return None
    src = e.data.get("from_node")
    inr = e.data.get("input_nr", e.data.get("slot"))
    if src is None or inr is None:
        return None
    return int(src), int(e.node), int(inr)


def _slots(state: EngineState, key: tuple[int | None, int]) -> tuple[Any, ...] | None:
    """InputBuffer slots of a node in not_ready (the live buffer, else the inserted one)."""
    if key not in state.not_ready:
        return None
    live = state.buffers.get(key)
    return tuple(live) if live is not None else tuple(state.not_ready[key])


def _deadlock_nodes(state: EngineState) -> dict[int, list[tuple[int, str]]]:
    """node id -> [(cycle index, why)] for the graph nodes the wait-for cycle touches."""
    out: dict[int, list[tuple[int, str]]] = {}
    dl = state.deadlock
    if not dl:
        return out
    for i, entry in enumerate(dl.get("cycle") or ()):
        entry = str(entry)
        kind, _, name = entry.partition(" ")
        if kind == "thread":
            t = state.threads.get(name)
            if t is not None and t.node is not None and t.node in state.nodes:
                out.setdefault(t.node, []).append((i, "inside"))
        elif kind == "queue":
            for task in state.queues.get(name, ()):
                if task.node is not None and task.node in state.nodes:
                    out.setdefault(task.node, []).append((i, "holds"))
                    break
    return out


@dataclass(frozen=True)
class _Ctx:
    """What the label builders need besides the state."""

    state: EngineState
    values: bool
    flow: tuple[int, int, int] | None  # (from_node, node, input_nr) that just flowed
    collapsed: frozenset[int]  # leaves drawn inside a collapsed node
    parents: dict[int, list[tuple[int, int]]]  # leaf -> [(parent, input_nr)] (collapsed only)
    deadlocked: frozenset[int]


def _node_lines(ctx: _Ctx, info: NodeInfo, ns: NodeState) -> list[tuple[str, str | None]]:
    """(html, cell colour) rows of a node's record after the header."""
    state = ctx.state
    rows: list[tuple[str, str | None]] = []
    gt = f" · GT{ns.graph_task}" if ns.graph_task is not None else ""
    rows.append((f"{_h(info.device)} · seq {fmt_seq(info.seq)}{gt}", None))
    rem = state.remaining(info.id)
    deps = "deps —" if rem is None else f"deps {rem}"
    where = ""
    if ns.state == "ready" and ns.where:
        where = f" in {ns.where}"
    elif ns.state == "running" and ns.where:
        where = f" on {ns.where}"
    rows.append((f"{_h(ns.state + where)} · {deps}", None))
    slots = _slots(state, (ns.graph_task, info.id))
    if slots is not None:
        for k, s in enumerate(slots):
            text = slot_text(s, ctx.values)
            rows.append((f"in {k}: {_h(text)}", SLOT_EMPTY if s is None else SLOT_FILLED))
    if info.leaf and ctx.values and info.id in state.leaf_grads:
        rows.append((f".grad = {_h(slot_text(state.leaf_grads[info.id]))}", None))
    # edges into collapsed leaves are not drawn: the parent lists them
    into = [(dst, inr) for dst, inr in info.next if dst is not None and dst in ctx.collapsed]
    if into:
        parts = []
        for dst, inr in into:
            text = f"#{dst}" + (f" in {inr}" if inr else "")
            if ctx.flow == (info.id, dst, inr):
                text = f'<FONT COLOR="{FLOW_COLOR}"><B>{text} (just flowed)</B></FONT>'
            parts.append(text)
        rows.append(("→ leaves " + ", ".join(parts), None))
    return rows


def _node_label(ctx: _Ctx, info: NodeInfo, ns: NodeState) -> Html:
    fill = STATE_STYLE.get(ns.state, ("#ffffff", ""))[0]
    border = (f' COLOR="{DEADLOCK_COLOR}" BORDER="3"' if info.id in ctx.deadlocked
              else ' COLOR="#343a40" BORDER="1"')
    font = ' COLOR="#495057"' if ns.state == "not_reached" else ""
    head = f"<B>{_h(info.name)}</B> #{info.id}"
    out = [f'<TABLE{border} CELLBORDER="0" CELLSPACING="0" CELLPADDING="3" BGCOLOR="{fill}">',
           f"<TR><TD><FONT{font}>{head}</FONT></TD></TR>" if font else f"<TR><TD>{head}</TD></TR>"]
    for html, colour in _node_lines(ctx, info, ns):
        bg = f' BGCOLOR="{colour}" BORDER="1" SIDES="T"' if colour else ""
        out.append(f"<TR><TD{bg}><FONT POINT-SIZE=\"9\"{font}>{html}</FONT></TD></TR>")
    out.append("</TABLE>")
    return Html("".join(out))


#: leaves per row (TB) or per column (LR) in a collapsed-leaves node
LEAVES_PER_LINE = 6


def _leaves_label(ctx: _Ctx, device: str, leaves: Sequence[int], rankdir: str) -> Html:
    """One table listing the collapsed AccumulateGrad leaves of a device (a grid)."""
    state = ctx.state
    cells = []
    for n in leaves:
        info = state.nodes[n]
        ns = state.node_states.get(n, NodeState("not_reached"))
        fill = STATE_STYLE.get(ns.state, ("#ffffff", ""))[0]
        lines = [f"<B>{_h(info.name)}</B> #{n}",
                 f"seq {fmt_seq(info.seq)} · {_h(ns.state)}"]
        rem = state.remaining(n)
        if rem is not None:
            lines[-1] += f" · deps {rem}"
        srcs = ctx.parents.get(n, [])
        if srcs:
            lines.append("from " + ", ".join(f"#{p}" + (f" in {inr}" if inr else "")
                                             for p, inr in srcs))
        slots = _slots(state, (ns.graph_task, n))
        if slots is not None:
            lines += [f"in {k}: {_h(slot_text(s, ctx.values))}" for k, s in enumerate(slots)]
        if ctx.values and n in state.leaf_grads:
            lines.append(f".grad = {_h(slot_text(state.leaf_grads[n]))}")
        if n in ctx.deadlocked:
            border = f' COLOR="{DEADLOCK_COLOR}" BORDER="3"'
        elif ctx.flow is not None and ctx.flow[1] == n:
            border = f' COLOR="{FLOW_COLOR}" BORDER="3"'
        else:
            border = ' BORDER="1"'
        cells.append(f'<TD PORT="n{n}" BGCOLOR="{fill}"{border}>'
                     f'<FONT POINT-SIZE="9">{"<BR/>".join(lines)}</FONT></TD>')
    count = f"{len(leaves)} leaf" if len(leaves) == 1 else f"{len(leaves)} leaves"
    head = f'<B>{count}</B> (AccumulateGrad, {_h(device)}; their in-edges are listed)'
    per = min(LEAVES_PER_LINE, len(cells))
    lines_of = [cells[i:i + per] for i in range(0, len(cells), per)]
    if rankdir == "LR":  # transpose: columns of `per` leaves
        lines_of = [[col[r] for col in lines_of if r < len(col)] for r in range(per)]
    width = max(len(line) for line in lines_of)
    rows = [f'<TR><TD COLSPAN="{width}"><FONT POINT-SIZE="9">{head}</FONT></TD></TR>']
    rows += ["<TR>" + "".join(line) + "</TR>" for line in lines_of]
    return Html('<TABLE BORDER="1" COLOR="#343a40" CELLBORDER="0" CELLSPACING="2" '
                'CELLPADDING="3" BGCOLOR="#ffffff">' + "".join(rows) + "</TABLE>")


def _task_text(state: EngineState, t: QueueTask) -> str:
    if t.node is None:
        what = "dummy (wake-up)"
    else:
        what = f"{state.node_name(t.node)} #{t.node}"
    gt = f"GT{t.graph_task}" if t.graph_task is not None else "no GT"
    return f"{what} · {gt} · depth {_fmt_depth(t.depth)} · seq {fmt_seq(t.seq)}"


def _side_label(state: EngineState) -> Html:
    """Ready queues, GraphTasks and threads as one HTML table."""
    left = ' ALIGN="LEFT" BALIGN="LEFT"'
    rows = ['<TABLE BORDER="1" COLOR="#343a40" CELLBORDER="0" CELLSPACING="0" '
            'CELLPADDING="3" BGCOLOR="#ffffff">']

    def section(title: str, ncols: int) -> None:
        rows.append(f'<TR><TD COLSPAN="{ncols}" BGCOLOR="#e9ecef"{left}><B>{title}</B>'
                    "</TD></TR>")

    def row(*cells: str) -> None:
        rows.append("<TR>" + "".join(f"<TD{left}>{c}</TD>" for c in cells) + "</TR>")

    ncols = 5
    section("Ready queues (pop order)", ncols)
    if not state.queues:
        row('<I>none yet</I>', "", "", "", "")
    for q in sorted(state.queues):
        tasks = state.queues[q]
        if not tasks:
            rows.append(f"<TR><TD{left}><B>{_h(q)}</B></TD>"
                        f'<TD COLSPAN="4"{left}><I>empty</I></TD></TR>')
        for i, t in enumerate(tasks):
            rows.append(f"<TR><TD{left}>{f'<B>{_h(q)}</B>' if i == 0 else ''}</TD>"
                        f"<TD{left}>{i + 1}.</TD>"
                        f'<TD COLSPAN="3"{left}>{_h(_task_text(state, t))}</TD></TR>')
    section("GraphTasks", ncols)
    if state.graph_tasks:
        row("<I>id</I>", "<I>owner</I>", "<I>depth</I>", "<I>outstanding</I>", "<I>status</I>")
    else:
        row("<I>none yet</I>", "", "", "", "")
    for gid in sorted(state.graph_tasks):
        g = state.graph_tasks[gid]
        if g.error:
            status = f'<FONT COLOR="{DEADLOCK_COLOR}">error: {_h(_trunc(g.error, 60))}</FONT>'
        else:
            status = "completed" if g.completed else "running"
        if g.parent is not None:
            status += f" · from GT{g.parent}" + (f" ({_h(g.handoff)})" if g.handoff else "")
        row(f"GT{gid}", _h(g.owner), str(g.reentrant_depth), str(g.outstanding), status)
    section("Threads", ncols)
    if not state.threads:
        row("<I>none yet</I>", "", "", "", "")
    for name in sorted(state.threads):
        t = state.threads[name]
        what = ""
        if t.nodes:
            what = "in " + " › ".join(f"{_h(state.node_name(n))} #{n}" for _, n in t.nodes)
        if t.waiting_on:
            what = (what + " · " if what else "") + "waiting on " + _h(t.waiting_on)
        colour = DEADLOCK_COLOR if state.deadlock and name in (state.deadlock.get("threads")
                                                                 or {}) else None
        name_html = f'<FONT COLOR="{colour}">{_h(name)}</FONT>' if colour else _h(name)
        rows.append(f"<TR><TD{left}><B>{name_html}</B></TD><TD{left}>{_h(t.state)}</TD>"
                    f'<TD COLSPAN="3"{left}>{what}</TD></TR>')
    rows.append("</TABLE>")
    return Html("".join(rows))


def _legend_label() -> Html:
    rows = ['<TABLE BORDER="1" COLOR="#343a40" CELLBORDER="0" CELLSPACING="2" '
            'CELLPADDING="2" BGCOLOR="#ffffff">',
            '<TR><TD COLSPAN="2" ALIGN="LEFT"><B>Legend</B></TD></TR>']
    for st, (colour, text) in STATE_STYLE.items():
        rows.append(f'<TR><TD BGCOLOR="{colour}" BORDER="1" WIDTH="24"> </TD>'
                    f'<TD ALIGN="LEFT"><FONT POINT-SIZE="9"><B>{_h(st)}</B>: {_h(text)}'
                    "</FONT></TD></TR>")
    rows.append(f'<TR><TD><FONT COLOR="{FLOW_COLOR}"><B>━━</B></FONT></TD><TD ALIGN="LEFT">'
                '<FONT POINT-SIZE="9">the gradient that just flowed (bold)</FONT></TD></TR>')
    rows.append('<TR><TD><FONT POINT-SIZE="9">in k</FONT></TD><TD ALIGN="LEFT">'
                '<FONT POINT-SIZE="9">edge feeds input k of the receiving node</FONT>'
                "</TD></TR>")
    rows.append(f'<TR><TD><FONT COLOR="{DEADLOCK_COLOR}"><B>━━</B></FONT></TD>'
                '<TD ALIGN="LEFT"><FONT POINT-SIZE="9">deadlock: the wait-for cycle</FONT>'
                "</TD></TR>")
    rows.append("</TABLE>")
    return Html("".join(rows))


def _title_label(state: EngineState, title: str | None) -> Html:
    text = _trunc(event_text(state), MAX_TITLE)
    head = f"<B>{_h(title)}</B> — " if title else ""
    return Html(f"{head}after {state.index} event{'s' if state.index != 1 else ''}"
                f'<BR ALIGN="LEFT"/>{_h(text)}<BR ALIGN="LEFT"/>')


def _wrap_html(text: str, width: int = 64) -> str:
    lines = textwrap.wrap(str(text), width) or [""]
    return "".join(f'{_h(line)}<BR ALIGN="LEFT"/>' for line in lines)


def to_dot(state: EngineState, *, rankdir: str = "TB", values: bool = True,
           collapse_leaves: bool = False, title: str | None = None) -> str:
    """The DOT text of one state (deterministic: the same state gives the same bytes)."""
    if rankdir not in RANKDIRS:
        raise ExportError(f"rankdir must be one of {', '.join(RANKDIRS)}, not {rankdir!r}")
    order = state.topological_order()
    flow = _flow_edge(state)
    dl_nodes = _deadlock_nodes(state)
    by_device: dict[str, list[int]] = {}
    for n in order:
        by_device.setdefault(state.nodes[n].device, []).append(n)
    collapsed: dict[int, str] = {}  # leaf id -> its collapsed node's name
    if collapse_leaves:
        for dev, ns in by_device.items():
            for n in ns:
                if state.nodes[n].leaf:
                    collapsed[n] = f"leaves_{_ident(dev)}"
    parents: dict[int, list[tuple[int, int]]] = {}
    for n in order:
        for dst, inr in state.nodes[n].next:
            if dst in collapsed:
                parents.setdefault(dst, []).append((n, inr))
    ctx = _Ctx(state, values, flow, frozenset(collapsed), parents, frozenset(dl_nodes))

    out = ["digraph autograd {"]
    out.append("  graph " + _attrs(
        id="autograd", rankdir=rankdir, fontname=FONT, fontsize=12, labelloc="t",
        labeljust="l", label=_title_label(state, title), nodesep=0.3, ranksep=0.45,
        bgcolor="white") + ";")
    out.append("  node " + _attrs(shape="none", margin=0, fontname=FONT, fontsize=10) + ";")
    out.append("  edge " + _attrs(fontname=FONT, fontsize=9, color=EDGE_COLOR,
                                  fontcolor=EDGE_COLOR, arrowsize=0.7) + ";")

    for dev in sorted(by_device):
        did = _ident(dev)
        out.append(f"  subgraph cluster_{did} {{")
        out.append("    graph " + _attrs(id=f"cluster_{did}", label=Html(f"<B>{_h(dev)}</B>"),
                                          style="rounded,dashed", color=CLUSTER_COLOR,
                                          fontcolor=CLUSTER_COLOR) + ";")
        leaves = []
        for n in by_device[dev]:
            if n in collapsed:
                leaves.append(n)
                continue
            info = state.nodes[n]
            ns = state.node_states.get(n, NodeState("not_reached"))
            out.append(f"    n{n} " + _attrs(
                id=f"n{n}", label=_node_label(ctx, info, ns),
                tooltip=f"{info.name} #{n} ({ns.state})") + ";")
        if leaves:
            leaves.sort()
            name = f"leaves_{did}"
            out.append(f"    {name} " + _attrs(
                id=name, label=_leaves_label(ctx, dev, leaves, rankdir),
                tooltip=f"{len(leaves)} AccumulateGrad leaves on {dev}") + ";")
            # no edges into it (long edges from everywhere make dot very slow): one
            # invisible edge from the deepest other node of the device keeps it below
            others = [m for m in by_device[dev] if m not in collapsed]
            if others:
                out.append(f"    n{others[-1]} -> {name} " + _attrs(style="invis") + ";")
        out.append("  }")

    # edges, in the direction the gradient flows (not into collapsed leaves)
    for n in order:
        for k, (dst, inr) in enumerate(state.nodes[n].next):
            if dst is None or dst not in state.nodes or dst in collapsed:
                continue
            tail = f"{collapsed[n]}:n{n}" if n in collapsed else f"n{n}"
            head = f"n{dst}"
            attrs: dict[str, Any] = {"id": f"e{n}_{k}", "label": f"in {inr}"}
            if flow is not None and flow == (n, dst, inr):
                attrs.update(style="bold", penwidth=3, color=FLOW_COLOR, fontcolor=FLOW_COLOR,
                             label=f"in {inr} (just flowed)")
            out.append(f"  {tail} -> {head} " + _attrs(**attrs) + ";")

    # side table and legend
    out.append("  side " + _attrs(id="side", label=_side_label(state)) + ";")
    out.append("  legend " + _attrs(id="legend", label=_legend_label()) + ";")
    out.append("  { rank=source; side; legend; }")

    # the wait-for cycle
    dl = state.deadlock
    if dl:
        cycle = [str(c) for c in (dl.get("cycle") or ())]
        out.append("  subgraph cluster_deadlock {")
        out.append("    graph " + _attrs(
            id="cluster_deadlock", label=Html("<B>deadlock: the wait-for cycle</B>"),
            style="rounded,bold", color=DEADLOCK_COLOR, fontcolor=DEADLOCK_COLOR) + ";")
        for i, entry in enumerate(cycle):
            out.append(f"    dl{i} " + _attrs(
                id=f"dl{i}", shape="box", margin="0.11,0.055", style="rounded,filled,bold",
                fillcolor="#fff5f5",
                color=DEADLOCK_COLOR, fontcolor=DEADLOCK_COLOR, penwidth=2, label=entry) + ";")
        if dl.get("explanation"):
            out.append("    dl_note " + _attrs(
                id="dl_note", shape="note", margin="0.11,0.055", style="filled",
                fillcolor="#fff5f5",
                color=DEADLOCK_COLOR, fontsize=9,
                label=Html(_wrap_html(str(dl['explanation'])))) + ";")
        out.append("  }")
        for i in range(len(cycle)):
            j = (i + 1) % len(cycle)
            out.append(f"  dl{i} -> dl{j} " + _attrs(
                id=f"dl{i}_{j}", color=DEADLOCK_COLOR, fontcolor=DEADLOCK_COLOR, penwidth=2.5,
                label="waits for") + ";")
        for n in sorted(dl_nodes):
            target = f"{collapsed[n]}:n{n}" if n in collapsed else f"n{n}"
            for i, why in dl_nodes[n]:
                out.append(f"  dl{i} -> {target} " + _attrs(
                    id=f"dl{i}_n{n}", color=DEADLOCK_COLOR, fontcolor=DEADLOCK_COLOR,
                    style="dashed", constraint=False, label=why) + ";")
    out.append("}")
    return "\n".join(out) + "\n"


# --- rendering --------------------------------------------------------------------------------
def find_dot() -> str | None:
    return shutil.which("dot")


def render(dot_source: str, fmt: str, *, timeout: float = 60.0, dot: str | None = None
           ) -> bytes:
    """Render DOT text with Graphviz ``dot``; returns the bytes of the svg/png/pdf."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    if fmt == "dot":
        return dot_source.encode()
    exe = dot or find_dot()
    if exe is None:
        raise DotNotFound(f"Graphviz `dot` is not on PATH; {INSTALL_HINT}")
    try:
        proc = subprocess.run([exe, f"-T{fmt}"], input=dot_source.encode(),
                              capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise RenderError(f"`dot -T{fmt}` took longer than {timeout:g} s and was stopped "
                          "(a larger --timeout, or --collapse-leaves, may help)") from None
    except OSError as e:
        raise RenderError(f"cannot run {exe}: {e.strerror or e}") from None
    if proc.returncode != 0 or not proc.stdout:
        err = proc.stderr.decode(errors="replace").strip() or f"exit code {proc.returncode}"
        raise RenderError(f"`dot -T{fmt}` failed: {_trunc(err, 500)}")
    return proc.stdout


def format_for(path: str | Path, fmt: str | None = None) -> str:
    """The output format: ``fmt`` if given, else from the suffix (.gv is dot; none: svg)."""
    if fmt is not None:
        f = str(fmt).lower().lstrip(".")
        if f not in FORMATS:
            raise ExportError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
        return f
    suffix = Path(path).suffix.lower().lstrip(".")
    if not suffix:
        return "svg"
    if suffix == "gv":
        return "dot"
    if suffix not in FORMATS:
        raise ExportError(f"unknown format {suffix!r} (from {Path(path).name}): use one of "
                          f"{', '.join(FORMATS)}")
    return suffix


def write_bytes(path: Path, data: bytes) -> None:
    """Write a file; any OSError becomes one ``ExportError`` naming the path."""
    try:
        path.write_bytes(data)
    except IsADirectoryError:
        raise ExportError(f"{path}: cannot write: it is a directory") from None
    except PermissionError:
        raise ExportError(f"{path}: cannot write: permission denied") from None
    except FileNotFoundError:
        raise ExportError(f"{path}: cannot write: the folder {path.parent} does not exist") \
            from None
    except NotADirectoryError:
        raise ExportError(f"{path}: cannot write: a part of the path is a file, not a "
                          "folder") from None
    except OSError as e:
        raise ExportError(f"{path}: cannot write: {e.strerror or e}") from None


def dot_path_for(path: Path) -> Path:
    """Where the DOT source goes when ``path`` cannot be rendered (``x.svg`` -> ``x.dot``)."""
    return path.with_suffix(".dot") if path.suffix else path.with_name(path.name + ".dot")


def render_failure_message(e: ExportError, fmt: str, written: str, command: str) -> str:
    if isinstance(e, DotNotFound):
        return (f"Graphviz `dot` was not found on PATH, so no {fmt} was made; {written}. "
                f"To render it, {INSTALL_HINT}; then run this again, or: {command}")
    return f"{e}; {written}"


def export_state(state: EngineState, path: str | Path, *, fmt: str | None = None,
                 rankdir: str = "TB", values: bool = True, collapse_leaves: bool = False,
                 title: str | None = None, timeout: float = 60.0) -> str:
    """Draw ``state`` into ``path`` (format from ``fmt`` or the suffix); return a message.

    Without ``dot`` (or if it fails) the DOT source is written next to ``path``
    (``x.svg`` -> ``x.dot``) and ``DotNotFound``/``RenderError`` says so.  Every
    problem is an ``ExportError`` with one clear message.
    """
    out = Path(path)
    f = format_for(out, fmt)
    if out.is_dir():
        raise ExportError(f"{out}: cannot write: it is a directory")
    text = to_dot(state, rankdir=rankdir, values=values, collapse_leaves=collapse_leaves,
                  title=title)
    if f == "dot":
        write_bytes(out, text.encode())
    else:
        try:
            data = render(text, f, timeout=timeout)
        except ExportError as e:
            fallback = dot_path_for(out)
            write_bytes(fallback, text.encode())
            msg = render_failure_message(e, f, f"the DOT source was written to {fallback}",
                                         f"dot -T{f} {fallback} -o {out}")
            raise type(e)(msg) from None
        write_bytes(out, data)
    return f"wrote {out} ({len(state.nodes)} nodes; {event_text(state)})"


# --- frames -----------------------------------------------------------------------------------
def frame_events(events: Sequence[Event], *, every: int | None = None,
                 breakpoints: bool = False) -> list[int]:
    """Indices of the events after which a frame is written.

    ``every=K``: events 0, K, 2K, ... and always the last one (K=1: one frame
    per event).  ``breakpoints``: every event of a kind in ``BREAKPOINT_KINDS``.
    """
    n = len(events)
    if breakpoints:
        return [i for i, e in enumerate(events) if e.kind in BREAKPOINT_KINDS]
    if every is None or every < 1:
        raise ExportError("every must be a positive number of events")
    out = list(range(0, n, every))
    if n and out[-1] != n - 1:
        out.append(n - 1)
    return out


def states_after(events: Sequence[Event], indices: Iterable[int]
                 ) -> Iterable[tuple[int, EngineState]]:
    """(i, the state after event i) for each wanted i, folding the events once."""
    wanted = sorted(set(indices))
    s = EngineState()
    pos = 0
    for i in wanted:
        while pos <= i:
            apply(s, events[pos])
            pos += 1
        yield i, s


@dataclass(frozen=True)
class Frame:
    file: str  # file name inside the frames directory
    event: int  # index of the event after which it was taken
    text: str  # the event, in one line


def index_html(frames: Sequence[Frame], *, title: str = "autograd-tui export",
               fmt: str = "svg") -> str:
    """A self-contained page that steps through the frames (←/→, Home/End)."""
    data = json.dumps([{"file": f.file, "event": f.event, "text": f.text} for f in frames],
                      ensure_ascii=False, indent=0).replace("</", "<\\/")
    first = f' src="{_h(frames[0].file)}"' if frames else ""
    viewer = (f'<img id="frame"{first} alt="frame">' if fmt in ("svg", "png")
              else f'<iframe id="frame"{first} title="frame"></iframe>')
    links = "\n".join(f'<li><a href="{_h(f.file)}" data-i="{i}">{_h(f.file)}</a> '
                      f"{_h(f.text)}</li>" for i, f in enumerate(frames))
    return _INDEX_TEMPLATE.format(title=_h(title), viewer=viewer, links=links, data=data,
                                  count=len(frames))


_INDEX_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font-family: Helvetica, Arial, sans-serif; margin: 0; }}
header {{ position: sticky; top: 0; background: #f8f9fa; border-bottom: 1px solid #dee2e6;
         padding: 8px 12px; display: flex; gap: 12px; align-items: center; }}
#pos {{ font-weight: bold; white-space: nowrap; }}
#text {{ font-family: monospace; }}
main {{ padding: 12px; }}
#frame {{ max-width: 100%; border: 0; }}
iframe#frame {{ width: 100%; height: 80vh; }}
details {{ padding: 0 12px 12px; }}
</style>
</head>
<body>
<header>
<button id="first" title="first frame (Home)">⏮</button>
<button id="prev" title="previous frame (←)">◀</button>
<span id="pos">frame 1 / {count}</span>
<button id="next" title="next frame (→)">▶</button>
<button id="last" title="last frame (End)">⏭</button>
<span id="text"></span>
</header>
<main>{viewer}</main>
<details><summary>all {count} frames</summary>
<ol start="0">
{links}
</ol>
</details>
<script>
const FRAMES = {data};
let cur = 0;
function show(i) {{
  if (!FRAMES.length) return;
  cur = Math.max(0, Math.min(FRAMES.length - 1, i));
  const f = FRAMES[cur];
  document.getElementById("frame").src = f.file;
  document.getElementById("pos").textContent =
    "frame " + (cur + 1) + " / " + FRAMES.length + " (event " + f.event + ")";
  document.getElementById("text").textContent = f.text;
  history.replaceState(null, "", "#" + cur);
}}
document.addEventListener("keydown", (ev) => {{
  if (ev.key === "ArrowRight") show(cur + 1);
  else if (ev.key === "ArrowLeft") show(cur - 1);
  else if (ev.key === "Home") show(0);
  else if (ev.key === "End") show(FRAMES.length - 1);
  else return;
  ev.preventDefault();
}});
document.getElementById("first").onclick = () => show(0);
document.getElementById("prev").onclick = () => show(cur - 1);
document.getElementById("next").onclick = () => show(cur + 1);
document.getElementById("last").onclick = () => show(FRAMES.length - 1);
for (const a of document.querySelectorAll("a[data-i]")) {{
  a.onclick = (ev) => {{ ev.preventDefault(); show(+a.dataset.i); window.scrollTo(0, 0); }};
}}
show(parseInt(location.hash.slice(1), 10) || 0);
</script>
</body>
</html>
"""
