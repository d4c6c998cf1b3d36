"""What a lean run of the explorer leaves out of its events, and the full run that stands
in for it where the rest must be read.

Not in PyTorch.  Of a run, the explorer reads its steps (who could move, who did), each
step's footprint (an event's kind, thread, GraphTask, queue and wait: ``dependence.py``)
and the outcome (the gradients, or the deadlock's wait-for cycle).  A lean run
(``fastrun.Cooperative(lean=True)``) builds its events without what none of that reads:
the tensors' summaries (a NumPy norm each) and the graph ``dependencies_computed``
describes (every node and its count, sorted: 18 us of a 500 us run of two threads).
Only the deadlock analysis of a run that cannot go on reads the rest (a History folded
from the events): that run is run again, in full, under the same choices (the explorer's
programs run the same way under the same schedule: else ``Nondeterministic``), and its
report taken.
"""

from __future__ import annotations

from typing import Any

from autograd_tui.control.search import Nondeterministic
from autograd_tui.engine.engine import Engine
from autograd_tui.engine.events import EVENT_TYPES, NULL
from autograd_tui.engine.graph import Node

_DEPS = EVENT_TYPES["dependencies_computed"]


def _no_summary(t: Any, full: bool) -> Any:
    return NULL


def install(engine: Engine) -> None:
    """Make ``engine``'s events lean: the same events, in the same order and number."""
    engine.summary_of = _no_summary  # the engine's hook: a null summary per tensor
    full, send, plain = engine._emit_dependencies, engine._send, Node.node_meta

    def lean_dependencies(root: Node, task: Any, min_topo_nr: int) -> None:
        for n in (root, *task.nodes_in_graph):  # one with a note (node_meta events): in full
            if type(n).node_meta is not plain and n.node_meta() is not None:
                full(root, task, min_topo_nr)
                return
        send(_DEPS, task, root, None, [], [], min_topo_nr)

    engine._emit_dependencies = lean_dependencies  # type: ignore[method-assign]


def uninstall(engine: Engine) -> None:
    """Drop what ``install`` put on the engine (a closure that names it: a cycle)."""
    engine.__dict__.pop("_emit_dependencies", None)


class _Again:
    """The full run's policy: the lean run's choices, one by one."""

    def __init__(self, choices: list[int]) -> None:
        self.choices, self.k = choices, 0

    def choose(self, eligible: list[Any]) -> Any:
        k = self.k
        self.k = k + 1
        if k < len(self.choices):
            for t in eligible:
                if t.index == self.choices[k]:
                    return t
        raise Nondeterministic(
            f"the scenario does not run the same way twice: at step {k + 1} of the same "
            f"schedule, threads {[t.index for t in eligible]} could move; the explorer "
            "needs a deterministic program")


def report_in_full(full: Any, choices: list[int]) -> Any:
    """The deadlock report of the run that ``choices`` gives, run in full: ``full``, a
    fresh ``fastrun.Cooperative`` of the same program, not lean."""
    full.policy = _Again(choices)
    try:
        status = full.run()
    finally:
        full.close()
    if status == "finished" or full.choices != choices:
        raise Nondeterministic("the scenario does not run the same way twice: a schedule "
                               "that stopped ran to its end; the explorer needs a "
                               "deterministic program")
    return full.report
