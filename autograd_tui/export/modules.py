"""The nn.Module clusters of a PyTorch graph (``node_meta``), nested by module path, with
repeated blocks folded.

The grouping is ``module_tree``'s (the app's grouped view draws the same tree): one
cluster per module, inside its parent's (``blocks.2`` holds ``blocks.2.attn``).  A fold,
``blocks.0..47 (Block) ×48``, is one cluster that holds the block with the shown node
(the last event's; else the first block) in full, and one summary node per other block
(``fold_cpu_blocks_7``: how many nodes it stands for, and their states).  Edges into and
out of a folded block go to its summary node (``ModuleClusters.rep``).  ``unfold`` draws
every block.  Nodes made outside any module sit in the device cluster itself, so a graph
without ``node_meta`` draws exactly as before modules were drawn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from autograd_tui.export.style import CLUSTER_COLOR, STATE_STYLE, Html, attrs, esc, ident
from autograd_tui.history.module_tree import (
    NO_MODULE,
    STATE_ORDER,
    Group,
    module_tree,
    state_counts,
)
from autograd_tui.history.state import EngineState

#: node id, indent -> the node's DOT statement (``to_dot`` draws a node)
NodeLine = Callable[[int, str], str]


@dataclass
class ModuleClusters:
    """The module clusters of one state, drawn device by device (``lines``)."""

    state: EngineState
    unfold: bool = False
    rep: dict[int, str] = field(default_factory=dict)  # folded-away node -> its summary node

    def __post_init__(self) -> None:
        self.tree = module_tree(self.state)
        e = self.state.last_event
        shown = e.node if e is not None else None
        self.holding = set(self.tree.where.get(shown, ())) if shown is not None else set()

    def lines(self, device: str, nodes: list[int], node_line: NodeLine) -> list[str]:
        """The DOT statements for ``nodes`` (one device's, topologically ordered)."""
        did = ident(device)
        keep = set(nodes)
        out: list[str] = []
        for g in self.tree.groups:  # outside any module: in the device cluster itself
            if g.key == NO_MODULE:
                out.extend(node_line(n, "    ") for n in g.own if n in keep)
        for g in self.tree.groups:
            if g.key != NO_MODULE:
                self._group(g, did, keep, node_line, "    ", out)
        return out

    def _group(self, g: Group, did: str, keep: set[int], node_line: NodeLine, indent: str,
               out: list[str]) -> None:
        if not any(n in keep for n in g.nodes):
            return
        if g.repeats > 1:
            if self.unfold:
                for c in g.children:
                    self._group(c, did, keep, node_line, indent, out)
            else:
                self._fold(g, did, keep, node_line, indent, out)
            return
        cid = f"cluster_m_{did}_{ident(g.key)}"
        out.append(f"{indent}subgraph {cid} {{")
        out.append(f"{indent}  graph " + attrs(
            id=cid, label=Html(f"{esc(g.key)} <I>{esc(g.type or '')}</I>"), style="rounded",
            color=CLUSTER_COLOR, fontcolor=CLUSTER_COLOR) + ";")
        out.extend(node_line(n, indent + "  ") for n in g.own if n in keep)
        for c in g.children:
            self._group(c, did, keep, node_line, indent + "  ", out)
        out.append(f"{indent}}}")

    def _fold(self, g: Group, did: str, keep: set[int], node_line: NodeLine, indent: str,
              out: list[str]) -> None:
        shown = next((c for c in g.children if c.key in self.holding), g.children[0])
        cid = f"cluster_f_{did}_{ident(g.key)}"
        label = f"{esc(g.label)} — showing {esc(shown.key)}"
        out.append(f"{indent}subgraph {cid} {{")
        out.append(f"{indent}  graph " + attrs(
            id=cid, label=Html(f"<B>{label}</B>"), style="rounded,bold", color=CLUSTER_COLOR,
            fontcolor=CLUSTER_COLOR) + ";")
        self._group(shown, did, keep, node_line, indent + "  ", out)
        for c in g.children:
            ns = [n for n in c.nodes if n in keep]
            if c is shown or not ns:
                continue
            name = f"fold_{did}_{ident(c.key)}"
            for n in ns:
                self.rep[n] = name
            out.append(f"{indent}  {name} " + attrs(
                id=name, label=self._summary(c, ns),
                tooltip=f"{c.key}: {len(ns)} nodes, folded (--unfold draws them)") + ";")
        out.append(f"{indent}}}")

    def _summary(self, g: Group, nodes: list[int]) -> Html:
        """A folded block's box: its path and type, and its nodes' states (the colour of
        the most active one)."""
        counts = state_counts(self.state, nodes)
        first = next(s for s in STATE_ORDER if s in counts) if counts else "not_reached"
        fill = STATE_STYLE.get(first, ("#ffffff", ""))[0]
        states = ", ".join(f"{counts[s]} {s.replace('_', ' ')}" for s in STATE_ORDER
                           if s in counts)
        return Html(
            f'<TABLE BORDER="1" STYLE="ROUNDED" COLOR="{CLUSTER_COLOR}" CELLBORDER="0" '
            f'CELLSPACING="0" CELLPADDING="3" BGCOLOR="{fill}">'
            f"<TR><TD><B>{esc(g.key)}</B> <I>{esc(g.type or '')}</I></TD></TR>"
            f'<TR><TD><FONT POINT-SIZE="9">{len(nodes)} nodes folded: {esc(states)}'
            f"</FONT></TD></TR></TABLE>")
