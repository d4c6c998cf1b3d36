"""The "first non-finite gradient" breakpoint: which node made a NaN or an Inf, and where it goes.

Not in PyTorch, whose anomaly mode raises at the first NaN (``Engine::evaluate_function``)
but only when it was on before the backward started.  Here any run can stop at the first
``node_end`` whose outputs hold a NaN or an Inf, ours or PyTorch's nodes driven through
the bridge alike, since both report the same tensor summaries: a summary's ``norm`` is
NaN when a value is NaN and Inf when one is infinite, and a non-finite float is written
as the string ``"nan"``, ``"inf"`` or ``"-inf"`` (``engine.events.summarize``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from autograd_tui.engine.events import Event
from autograd_tui.words import node_label, value_summary

_NONFINITE = {"nan": "NaN", "inf": "Inf", "-inf": "-Inf"}


def nonfinite(summary: Any) -> str | None:
    """"NaN" or "Inf" when the summarised tensor holds one (NaN wins), else None."""
    s = value_summary(summary)
    if s is None or not isinstance(s, dict):
        return None
    found = [_NONFINITE[v] for v in [*s.get("values", ()), s.get("norm")]
             if isinstance(v, str) and v in _NONFINITE]
    if not found:
        return None
    return "NaN" if "NaN" in found else "Inf"


class Finding(NamedTuple):
    """A node whose output gradient ``slot`` holds ``what`` (NaN or Inf)."""
    event: Event  # the node_end
    slot: int
    what: str


def first_nonfinite(e: Event) -> Finding | None:
    """The first non-finite output of a ``node_end`` event (None for other events)."""
    if e.kind != "node_end":
        return None
    outputs = value_summary(e.outputs, many=True) or []
    for slot, out in enumerate(outputs):
        what = nonfinite(out)
        if what is not None:
            return Finding(e, slot, what)
    return None


def explain(f: Finding, history: Any) -> str:
    """In words: the node, the output, the input of the next node it flows to, and whether
    the node's own incoming gradients were finite (then it made the value) or not (it
    passed it on).  ``history`` holds the ``node_end`` (its event ``f.event.seq``)."""
    e = f.event
    state = history.state_at(e.seq)
    def label(n: int) -> str:
        return node_label(state.node_name(n), n)

    node = label(e.node) if e.node is not None else "a node"
    info = state.nodes.get(e.node)
    where = ""
    if info is not None and f.slot < len(info.next):
        target, input_nr = info.next[f.slot]
        if target is not None:
            where = f", which flows to input {input_nr} of {label(target)}"
        else:
            where = ", which flows nowhere: that input needs no gradient"
    incoming = _inputs(history.events, e)
    if incoming is None:
        why = ""
    elif any(nonfinite(x) for x in incoming):
        why = "; its incoming gradient was already non-finite (from the root or a hook)"
    else:
        why = "; its incoming gradients were finite, so this node made it"
    return (f"first non-finite gradient: {node} output {f.slot} holds {f.what} (the "
            f"gradient for its forward input {f.slot}{where}){why}")


def _inputs(events: list[Event], e: Event) -> list[Any] | None:
    """The gradients the node received: its ``node_start`` on the same thread, the last
    one before the ``node_end``."""
    for k in range(e.seq - 2, -1, -1):  # event k+1 is events[k]
        x = events[k]
        if x.node == e.node and x.thread == e.thread and x.kind == "node_start":
            return value_summary(x.inputs, many=True) or []
    return None
