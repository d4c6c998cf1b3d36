"""The HTML-like labels of a snapshot: a node's table, collapsed leaves, the side table.

``to_dot`` (``export/dot.py``) lays the graph out; this module says what each box
holds.  A node's table: its name and id, device, sequence number (AccumulateGrad's
``UINT64_MAX`` reads ``max``, as everywhere: ``words.seq_text``), GraphTask, state,
remaining dependencies and, while it waits in ``not_ready``, its InputBuffer slots.
The side table lists the ready queues in pop order, the GraphTasks and the threads;
the title names the last event (``event_text``).  Everything here reads the
``EngineState`` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autograd_tui.engine.events import NodeInfo
from autograd_tui.engine.events import summary as plain_summary
from autograd_tui.export.style import (
    DEADLOCK_COLOR,
    FLOW_COLOR,
    MAX_TITLE,
    SLOT_EMPTY,
    SLOT_FILLED,
    STATE_STYLE,
    Html,
    esc,
    trunc,
)
from autograd_tui.history.state import EngineState, NodeState, QueueTask, shown
from autograd_tui.words import event_words, plain, seq_text, short_value, wait_words, where

#: leaves per row (TB) or per column (LR) in a collapsed-leaves node
LEAVES_PER_LINE = 6
QUEUE_ROWS = 50  # tasks per queue in the side table (a wide queue ends with a count)


# --- small formatting ---------------------------------------------------------------------------
def _seq(seq: int | None) -> str:
    """A queue task's sequence number; a dummy (wake-up) task has none."""
    return "-" if seq is None else seq_text(seq)


def _depth(depth: int) -> str:
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


def event_text(state: EngineState) -> str:
    """The state's last event in one line: ``event 33 · cpu (owner) · GT1 · ...``.

    The number is the event's position (``state.index``: event k is the k-th
    event, and ``state_at(k)`` ends with it), not its ``seq`` field."""
    e = state.last_event
    if e is None:
        return "no events yet"
    body = event_words(e, {i: info.name for i, info in state.nodes.items()})
    return " · ".join(p for p in (f"event {state.index}", plain(e.thread), where(e),
                                  body.strip()) if p)


def slots_of(state: EngineState, key: tuple[int | None, int]) -> tuple[Any, ...] | None:
    """InputBuffer slots of a node in not_ready (the live buffer, else the inserted one)."""
    if key not in state.not_ready:
        return None
    live = state.buffers.get(key)
    return live if live is not None else state.not_ready[key]


STACK_SHOWN = 8  # a thread's nodes shown, innermost last

@dataclass(frozen=True)
class LabelContext:
    """What the label builders need besides the state."""

    state: EngineState
    values: bool
    flow: tuple[int, int, int] | None  # (from_node, node, input_nr) that just flowed
    collapsed: frozenset[int]  # leaves drawn inside a collapsed node
    parents: dict[int, list[tuple[int, int]]]  # leaf -> [(parent, input_nr)] (collapsed only)
    deadlocked: frozenset[int]


# --- labels -----------------------------------------------------------------------------------
def _node_lines(ctx: LabelContext, info: NodeInfo, ns: NodeState) -> list[tuple[str, str | None]]:
    """(html, cell colour) rows of a node's record after the header."""
    state = ctx.state
    rows: list[tuple[str, str | None]] = []
    gt = f" · GT{ns.graph_task}" if ns.graph_task is not None else ""
    rows.append((f"{esc(info.device)} · seq {seq_text(info.seq)}{gt}", None))
    rem = state.remaining(info.id)
    deps = "deps —" if rem is None else f"deps {rem}"
    where = ""
    if ns.state == "ready" and ns.where:
        where = f" in {ns.where}"
    elif ns.state == "running" and ns.where:
        where = f" on {ns.where}"
    rows.append((f"{esc(ns.state + where)} · {deps}", None))
    slots = slots_of(state, (ns.graph_task, info.id))
    if slots is not None:
        first, more = shown(slots)
        for k, s in first:
            text = slot_text(s, ctx.values)
            rows.append((f"in {k}: {esc(text)}", SLOT_EMPTY if s is None else SLOT_FILLED))
        if more:
            rows.append((f"… {more:,} more", None))
    if info.leaf and ctx.values and info.id in state.leaf_grads:
        rows.append((f".grad = {esc(slot_text(state.leaf_grads[info.id]))}", None))
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


def node_table(ctx: LabelContext, info: NodeInfo, ns: NodeState) -> Html:
    fill = STATE_STYLE.get(ns.state, ("#ffffff", ""))[0]
    border = (f' COLOR="{DEADLOCK_COLOR}" BORDER="3"' if info.id in ctx.deadlocked
              else ' COLOR="#343a40" BORDER="1"')
    font = ' COLOR="#495057"' if ns.state == "not_reached" else ""
    head = f"<B>{esc(info.name)}</B> #{info.id}"
    out = [f'<TABLE{border} CELLBORDER="0" CELLSPACING="0" CELLPADDING="3" BGCOLOR="{fill}">',
           f"<TR><TD><FONT{font}>{head}</FONT></TD></TR>" if font else f"<TR><TD>{head}</TD></TR>"]
    for html, colour in _node_lines(ctx, info, ns):
        bg = f' BGCOLOR="{colour}" BORDER="1" SIDES="T"' if colour else ""
        out.append(f"<TR><TD{bg}><FONT POINT-SIZE=\"9\"{font}>{html}</FONT></TD></TR>")
    out.append("</TABLE>")
    return Html("".join(out))


def leaves_table(ctx: LabelContext, device: str, leaves: Sequence[int], rankdir: str) -> Html:
    """One table listing the collapsed AccumulateGrad leaves of a device (a grid)."""
    state = ctx.state
    cells = []
    for n in leaves:
        info = state.nodes[n]
        ns = state.node_states.get(n, NodeState("not_reached"))
        fill = STATE_STYLE.get(ns.state, ("#ffffff", ""))[0]
        lines = [f"<B>{esc(info.name)}</B> #{n}",
                 f"seq {seq_text(info.seq)} · {esc(ns.state)}"]
        rem = state.remaining(n)
        if rem is not None:
            lines[-1] += f" · deps {rem}"
        srcs = ctx.parents.get(n, [])
        if srcs:
            lines.append("from " + ", ".join(f"#{p}" + (f" in {inr}" if inr else "")
                                             for p, inr in srcs))
        slots = slots_of(state, (ns.graph_task, n))
        if slots is not None:
            first, more = shown(slots)
            lines += [f"in {k}: {esc(slot_text(s, ctx.values))}" for k, s in first]
            lines += [f"… {more:,} more"] if more else []
        if ctx.values and n in state.leaf_grads:
            lines.append(f".grad = {esc(slot_text(state.leaf_grads[n]))}")
        if n in ctx.deadlocked:
            border = f' COLOR="{DEADLOCK_COLOR}" BORDER="3"'
        elif ctx.flow is not None and ctx.flow[1] == n:
            border = f' COLOR="{FLOW_COLOR}" BORDER="3"'
        else:
            border = ' BORDER="1"'
        cells.append(f'<TD PORT="n{n}" BGCOLOR="{fill}"{border}>'
                     f'<FONT POINT-SIZE="9">{"<BR/>".join(lines)}</FONT></TD>')
    count = f"{len(leaves)} leaf" if len(leaves) == 1 else f"{len(leaves)} leaves"
    head = f'<B>{count}</B> (AccumulateGrad, {esc(device)}; their in-edges are listed)'
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
    return f"{what} · {gt} · depth {_depth(t.depth)} · seq {_seq(t.seq)}"


def side_table(state: EngineState) -> Html:
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
    if not state.heaps:
        row('<I>none yet</I>', "", "", "", "")
    for q in sorted(state.heaps):
        tasks, n = state.queue_order(q, QUEUE_ROWS), state.queue_len(q)
        if not tasks:
            rows.append(f"<TR><TD{left}><B>{esc(q)}</B></TD>"
                        f'<TD COLSPAN="4"{left}><I>empty</I></TD></TR>')
        for i, t in enumerate(tasks):
            rows.append(f"<TR><TD{left}>{f'<B>{esc(q)}</B>' if i == 0 else ''}</TD>"
                        f"<TD{left}>{i + 1}.</TD>"
                        f'<TD COLSPAN="3"{left}>{esc(_task_text(state, t))}</TD></TR>')
        if n > len(tasks):
            rows.append(f'<TR><TD></TD><TD COLSPAN="4"{left}><I>… and {n - len(tasks):,} '
                        "more</I></TD></TR>")
    section("GraphTasks", ncols)
    if state.graph_tasks:
        row("<I>id</I>", "<I>owner</I>", "<I>depth</I>", "<I>outstanding</I>", "<I>status</I>")
    else:
        row("<I>none yet</I>", "", "", "", "")
    for gid in sorted(state.graph_tasks):
        g = state.graph_tasks[gid]
        if g.error:
            status = f'<FONT COLOR="{DEADLOCK_COLOR}">error: {esc(trunc(g.error, 60))}</FONT>'
        else:
            status = "completed" if g.completed else "running"
        if g.parent is not None:
            status += f" · from GT{g.parent}" + (f" ({esc(g.handoff)})" if g.handoff else "")
        row(f"GT{gid}", esc(g.owner), str(g.reentrant_depth), str(g.outstanding), status)
    section("Threads", ncols)
    if not state.threads:
        row("<I>none yet</I>", "", "", "", "")
    for name in sorted(state.threads):
        t = state.threads[name]
        what = ""
        if t.nodes:
            inner = list(t.nodes)[-STACK_SHOWN:]  # the innermost: a stack can be deep
            what = ("… " if len(t.nodes) > STACK_SHOWN else "") + "in " + " › ".join(
                f"{esc(state.node_name(n))} #{n}" for _, n in inner)
        if t.waiting_on:
            what = (what + " · " if what else "") + "waiting on " + esc(
                wait_words(*t.waiting_on))
        colour = DEADLOCK_COLOR if state.deadlock and name in (state.deadlock.get("threads")
                                                                 or {}) else None
        name_html = f'<FONT COLOR="{colour}">{esc(name)}</FONT>' if colour else esc(name)
        rows.append(f"<TR><TD{left}><B>{name_html}</B></TD><TD{left}>{esc(t.state)}</TD>"
                    f'<TD COLSPAN="3"{left}>{what}</TD></TR>')
    rows.append("</TABLE>")
    return Html("".join(rows))


def legend_table() -> Html:
    rows = ['<TABLE BORDER="1" COLOR="#343a40" CELLBORDER="0" CELLSPACING="2" '
            'CELLPADDING="2" BGCOLOR="#ffffff">',
            '<TR><TD COLSPAN="2" ALIGN="LEFT"><B>Legend</B></TD></TR>']
    for st, (colour, text) in STATE_STYLE.items():
        rows.append(f'<TR><TD BGCOLOR="{colour}" BORDER="1" WIDTH="24"> </TD>'
                    f'<TD ALIGN="LEFT"><FONT POINT-SIZE="9"><B>{esc(st)}</B>: {esc(text)}'
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


def title_html(state: EngineState, title: str | None) -> Html:
    text = trunc(event_text(state), MAX_TITLE)
    head = f"<B>{esc(title)}</B> — " if title else ""
    return Html(f"{head}after {state.index} event{'s' if state.index != 1 else ''}"
                f'<BR ALIGN="LEFT"/>{esc(text)}<BR ALIGN="LEFT"/>')

