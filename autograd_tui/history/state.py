"""``EngineState``: everything a person can see, as a pure fold of events.

Not in PyTorch.  The app's panes, the Graphviz export and the text trace all
read this one structure; none of them re-derives state on its own.  Every
value inside is immutable (tuples, NamedTuples, raw JSON summaries), so a
snapshot is a handful of shallow dict copies.

Folding also *validates*: an event that contradicts the state (a pop from an
empty queue or of a task that is not at its head, a dependency decremented
below zero, a not_ready entry removed that was never inserted, ...) raises
``StateError``.  Loading a recording uses this to reject tampered files.

``History`` keeps the events and makes ``state_at(i)`` fast in both directions
without copying the whole state every K events (the state grows with every
graph a run touches, so that would be quadratic): every ``every`` events it
stores only the entries the events since the previous snapshot touched (a
delta), and a full copy (a checkpoint) once the deltas since the last one add
up to a quarter of the size of the state.  A seek is one checkpoint copy, a few
dict updates and fewer than ``every`` folds.  The handlers below are written for
speed (plain dicts, ``tuple.__new__`` instead of ``NamedTuple._replace``): a
loaded recording is folded once, whole.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from autograd_tui.engine.events import Event, NodeInfo, QueueTask

NODE_STATES = ("not_reached", "not_ready", "ready", "running", "done", "skipped", "errored")


class StateError(ValueError):
    """An event that contradicts the state folded so far."""


class NodeState(NamedTuple):
    state: str  # one of NODE_STATES
    where: str | None = None  # the queue (ready) or thread (running)
    graph_task: int | None = None


class GraphTaskState(NamedTuple):
    id: int
    owner: str
    reentrant_depth: int
    keep_graph: bool
    create_graph: bool
    accumulate_grad: bool
    roots: tuple[int, ...]
    graph_root: int
    completed: bool = False
    error: str | None = None
    needed: tuple[int, ...] | None = None  # exec_info (grad(), backward(inputs=...))
    parent: int | None = None  # the GraphTask whose node started this reentrant one
    handoff: str | None = None  # nested | pool | block
    outstanding: int = 0  # last: the fold replaces it with gt[:-1] + (n,)


class ThreadState(NamedTuple):
    name: str
    state: str  # running | waiting | finished
    waiting_on: str | None = None
    nodes: tuple[tuple[int | None, int], ...] = ()  # (graph_task, node) stack, innermost last

    @property
    def node(self) -> int | None:
        return self.nodes[-1][1] if self.nodes else None

    @property
    def depth(self) -> int:
        return len(self.nodes)


Key = tuple[int | None, int]  # (graph_task, node)


_new = tuple.__new__  # builds a NamedTuple from a tuple without its Python-level __new__
_get_node, _get_gt = operator.attrgetter("node"), operator.attrgetter("graph_task")
_get_id = operator.attrgetter("id")


@dataclass
class EngineState:
    index: int = 0  # how many events have been folded
    nodes: dict[int, NodeInfo] = field(default_factory=dict)
    node_states: dict[int, NodeState] = field(default_factory=dict)
    dependencies: dict[Key, int] = field(default_factory=dict)  # (gt, node) -> remaining
    queues: dict[str, tuple[QueueTask, ...]] = field(default_factory=dict)
    buffers: dict[Key, tuple[Any, ...]] = field(default_factory=dict)  # slot summaries
    not_ready: dict[Key, tuple[Any, ...]] = field(default_factory=dict)  # slot summaries
    graph_tasks: dict[int, GraphTaskState] = field(default_factory=dict)
    threads: dict[str, ThreadState] = field(default_factory=dict)
    leaf_grads: dict[int, Any] = field(default_factory=dict)  # AccumulateGrad id -> summary
    outputs: dict[int, Any] = field(default_factory=dict)  # id -> output summaries (raw list)
    last_event: Event | None = None
    deadlock: dict[str, Any] | None = None
    # node id -> node_meta fields (a PyTorch graph: module, creation site, saved tensors)
    node_meta: dict[int, dict[str, Any]] = field(default_factory=dict)
    # Since History's last snapshot (scratch, not state): the entries the inline kinds
    # wrote (map name -> {key: value or _GONE}) and the other events folded.
    changes: dict[str, dict[Any, Any]] = field(default_factory=lambda: _no_changes(),
                                               compare=False, repr=False)
    rare: list[Event] = field(default_factory=list, compare=False, repr=False)

    # --- copies ---------------------------------------------------------------------------
    def copy(self) -> EngineState:
        return EngineState(
            self.index, self.nodes.copy(), self.node_states.copy(), self.dependencies.copy(),
            self.queues.copy(), self.buffers.copy(), self.not_ready.copy(),
            self.graph_tasks.copy(), self.threads.copy(), self.leaf_grads.copy(),
            self.outputs.copy(), self.last_event, self.deadlock, self.node_meta.copy(),
        )

    def size(self) -> int:
        """Entries in all maps (what a copy costs)."""
        return sum(len(getattr(self, f)) for f in _NODE_MAPS + _PAIR_MAPS + ("graph_tasks",))

    # --- queries used by the views ------------------------------------------------------------
    def node_name(self, node: int | None) -> str:
        if node is None:
            return "dummy"
        info = self.nodes.get(node)
        return info.name if info else f"node {node}"

    def remaining(self, node: int) -> int | None:
        """Dependencies left for ``node`` in the latest GraphTask that counts them."""
        gt = self.node_states.get(node, NodeState("not_reached")).graph_task
        return self.dependencies.get((gt, node))

    def topological_order(self) -> list[int]:
        """Nodes from the roots to the leaves (higher topological number first)."""
        return sorted(self.nodes, key=lambda n: (-self.nodes[n].topo, -self.nodes[n].seq, n))


# --- what the fold records for History's snapshots ---------------------------------------
_NODE_MAPS = ("nodes", "node_states", "leaf_grads", "outputs", "node_meta")  # by node id
_PAIR_MAPS = ("dependencies", "buffers", "not_ready")  # keyed by (GraphTask, node)
_GONE = object()  # in a delta: the key was deleted


def _no_changes() -> dict[str, dict[Any, Any]]:
    return {name: {} for name in _NODE_MAPS + _PAIR_MAPS + ("graph_tasks",)}
