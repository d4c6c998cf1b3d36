"""``to_dot(state)``: one moment of a backward pass as Graphviz DOT text.

Not in PyTorch.  The picture is drawn from the ``EngineState`` alone (never the
engine, the controller or any event but ``state.last_event``), so a recording
draws exactly like a live run:

* one node per backward node, an HTML-like table (``export/labels.py``) filled
  with the colour of its state (``STATE_STYLE``, drawn as a legend);
* one edge per next edge, in the direction the gradient flows, labelled with
  the input number it feeds; the edge whose gradient just flowed (the last
  event's ``from_node -> node``, for ``dependency_decrement`` and
  ``buffer_accumulate``) is bold and blue;
* one cluster per device; in a PyTorch graph (``node_meta``), inside it one per
  ``nn.Module`` that made nodes, nested by module path, repeated blocks folded
  (``export/modules.py``; ``unfold`` draws every block);
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
"""

from __future__ import annotations

from typing import Any

from autograd_tui.export.labels import (
    LabelContext,
    leaves_table,
    legend_table,
    node_table,
    side_table,
    title_html,
)
from autograd_tui.export.modules import ModuleClusters
from autograd_tui.export.render import ExportError
from autograd_tui.export.style import (
    CLUSTER_COLOR,
    DEADLOCK_COLOR,
    EDGE_COLOR,
    FLOW_COLOR,
    FONT,
    Html,
    attrs,
    esc,
    ident,
    wrap_html,
)
from autograd_tui.history.state import EngineState, NodeState

RANKDIRS = ("TB", "LR")


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
            for task in state.queue_order(name):
                if task.node is not None and task.node in state.nodes:
                    out.setdefault(task.node, []).append((i, "holds"))
                    break
    return out


def to_dot(state: EngineState, *, rankdir: str = "TB", values: bool = True,
           collapse_leaves: bool = False, title: str | None = None,
           unfold: bool = False) -> str:
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
                    collapsed[n] = f"leaves_{ident(dev)}"
    parents: dict[int, list[tuple[int, int]]] = {}
    for n in order:
        for dst, inr in state.nodes[n].next:
            if dst in collapsed:
                parents.setdefault(dst, []).append((n, inr))
    ctx = LabelContext(state, values, flow, frozenset(collapsed), parents, frozenset(dl_nodes))

    modules = ModuleClusters(state, unfold)

    def node_line(n: int, indent: str) -> str:
        info = state.nodes[n]
        ns = state.node_states.get(n, NodeState("not_reached"))
        return f"{indent}n{n} " + attrs(id=f"n{n}", label=node_table(ctx, info, ns),
                                        tooltip=f"{info.name} #{n} ({ns.state})") + ";"

    out = ["digraph autograd {"]
    out.append("  graph " + attrs(
        id="autograd", rankdir=rankdir, fontname=FONT, fontsize=12, labelloc="t",
        labeljust="l", label=title_html(state, title), nodesep=0.3, ranksep=0.45,
        bgcolor="white") + ";")
    out.append("  node " + attrs(shape="none", margin=0, fontname=FONT, fontsize=10) + ";")
    out.append("  edge " + attrs(fontname=FONT, fontsize=9, color=EDGE_COLOR,
                                  fontcolor=EDGE_COLOR, arrowsize=0.7) + ";")

    for dev in sorted(by_device):
        did = ident(dev)
        out.append(f"  subgraph cluster_{did} {{")
        out.append("    graph " + attrs(id=f"cluster_{did}", label=Html(f"<B>{esc(dev)}</B>"),
                                          style="rounded,dashed", color=CLUSTER_COLOR,
                                          fontcolor=CLUSTER_COLOR) + ";")
        leaves = [n for n in by_device[dev] if n in collapsed]
        out.extend(modules.lines(dev, [n for n in by_device[dev] if n not in collapsed],
                                 node_line))
        if leaves:
            leaves.sort()
            name = f"leaves_{did}"
            out.append(f"    {name} " + attrs(
                id=name, label=leaves_table(ctx, dev, leaves, rankdir),
                tooltip=f"{len(leaves)} AccumulateGrad leaves on {dev}") + ";")
            # no edges into it (long edges from everywhere make dot very slow): one
            # invisible edge from the deepest other node of the device keeps it below
            others = [m for m in by_device[dev] if m not in collapsed]
            if others:
                last = modules.rep.get(others[-1], f"n{others[-1]}")
                out.append(f"    {last} -> {name} " + attrs(style="invis") + ";")
        out.append("  }")

    # edges, in the direction the gradient flows (not into collapsed leaves); the edges
    # of folded blocks go to their summary nodes, one edge per pair of ends
    rep = modules.rep
    folded: dict[tuple[str, str], tuple[str, int, int, bool]] = {}  # ends -> id, in, count, flowed
    for n in order:
        for k, (dst, inr) in enumerate(state.nodes[n].next):
            if dst is None or dst not in state.nodes or dst in collapsed:
                continue
            tail = f"{collapsed[n]}:n{n}" if n in collapsed else f"n{n}"
            head = f"n{dst}"
            just = flow is not None and flow == (n, dst, inr)
            if n in rep or dst in rep:
                ends = (rep.get(n, tail), rep.get(dst, head))
                if ends[0] != ends[1]:
                    eid, first, count, was = folded.get(ends, (f"e{n}_{k}", inr, 0, False))
                    folded[ends] = (eid, first, count + 1, was or just)
                continue
            edge: dict[str, Any] = {"id": f"e{n}_{k}", "label": f"in {inr}"}
            if just:
                edge.update(style="bold", penwidth=3, color=FLOW_COLOR, fontcolor=FLOW_COLOR,
                            label=f"in {inr} (just flowed)")
            out.append(f"  {tail} -> {head} " + attrs(**edge) + ";")
    for (tail, head), (eid, inr, count, just) in folded.items():
        edge = {"id": eid, "label": f"in {inr}" if count == 1 else f"{count} edges"}
        if just:
            edge.update(style="bold", penwidth=3, color=FLOW_COLOR, fontcolor=FLOW_COLOR)
        out.append(f"  {tail} -> {head} " + attrs(**edge) + ";")

    # side table and legend
    out.append("  side " + attrs(id="side", label=side_table(state)) + ";")
    out.append("  legend " + attrs(id="legend", label=legend_table()) + ";")
    out.append("  { rank=source; side; legend; }")

    # the wait-for cycle
    dl = state.deadlock
    if dl:
        cycle = [str(c) for c in (dl.get("cycle") or ())]
        out.append("  subgraph cluster_deadlock {")
        out.append("    graph " + attrs(
            id="cluster_deadlock", label=Html("<B>deadlock: the wait-for cycle</B>"),
            style="rounded,bold", color=DEADLOCK_COLOR, fontcolor=DEADLOCK_COLOR) + ";")
        for i, entry in enumerate(cycle):
            out.append(f"    dl{i} " + attrs(
                id=f"dl{i}", shape="box", margin="0.11,0.055", style="rounded,filled,bold",
                fillcolor="#fff5f5",
                color=DEADLOCK_COLOR, fontcolor=DEADLOCK_COLOR, penwidth=2, label=entry) + ";")
        if dl.get("explanation"):
            out.append("    dl_note " + attrs(
                id="dl_note", shape="note", margin="0.11,0.055", style="filled",
                fillcolor="#fff5f5",
                color=DEADLOCK_COLOR, fontsize=9,
                label=Html(wrap_html(str(dl['explanation'])))) + ";")
        out.append("  }")
        for i in range(len(cycle)):
            j = (i + 1) % len(cycle)
            out.append(f"  dl{i} -> dl{j} " + attrs(
                id=f"dl{i}_{j}", color=DEADLOCK_COLOR, fontcolor=DEADLOCK_COLOR, penwidth=2.5,
                label="waits for") + ";")
        for n in sorted(dl_nodes):
            target = (f"{collapsed[n]}:n{n}" if n in collapsed
                      else modules.rep.get(n, f"n{n}"))
            for i, why in dl_nodes[n]:
                out.append(f"  dl{i} -> {target} " + attrs(
                    id=f"dl{i}_n{n}", color=DEADLOCK_COLOR, fontcolor=DEADLOCK_COLOR,
                    style="dashed", constraint=False, label=why) + ";")
    out.append("}")
    return "\n".join(out) + "\n"

