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

from autograd_tui.engine.events import Event, NodeInfo
from autograd_tui.engine.ready_queue import (
    NodeTask,
    compare_ignoring_depth,
    compare_node_task_time,
    pop_heap,
)

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
    freed: bool = False  # its weak pointer expired (``gone`` in a push or pop)
    needed: tuple[int, ...] | None = None  # exec_info (grad(), backward(inputs=...))
    parent: int | None = None  # the GraphTask whose node started this reentrant one
    handoff: str | None = None  # nested | pool | block
    created: int = 0  # its graph_task_created event (k): the views list GraphTasks by it
    outstanding: int = 0  # last: the fold replaces it with gt[:-1] + (n,)


class Stack:
    """A thread's (graph_task, node) stack as linked cells, innermost last: pushing
    (``stack + (item,)``) and popping (``stack[:-1]``) cost the same whatever its depth,
    and states share the cells below (a tuple copied at each start made a run of nested
    starts quadratic).  Reads like a tuple: ``len``, ``[-1]``, iteration outermost first,
    equality with a tuple of the same items."""
    __slots__ = ("parent", "top", "size")

    def __init__(self, parent: Stack | None = None, top: Any = None) -> None:
        self.parent, self.top = parent, top
        self.size = 0 if parent is None else parent.size + 1

    def __len__(self) -> int:
        return self.size

    def __add__(self, items: tuple[Any, ...]) -> Stack:
        s = self
        for item in items:
            s = Stack(s, item)
        return s

    def __getitem__(self, i: Any) -> Any:
        if i == -1 and self.size:
            return self.top
        if isinstance(i, slice) and i == slice(None, -1, None):
            return self.parent if self.size else self
        return tuple(self)[i]

    def __iter__(self) -> Any:
        out, s = [], self
        while s.size:
            out.append(s.top)
            s = s.parent  # type: ignore[assignment]
        return reversed(out)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Stack):
            return self is other or (self.size == other.size and tuple(self) == tuple(other))
        return isinstance(other, tuple) and tuple(self) == other

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


EMPTY_STACK = Stack()


class Slots:
    """A node's InputBuffer slot summaries: only the filled ones are stored, in chunks of
    ``CHUNK`` slots, so a node stating 65,536 inputs that receives one gradient costs one
    chunk, not a 65,536-slot tuple, and filling a slot copies one chunk and the chunk
    table, never the whole buffer (states share the rest).  Reads like a tuple of
    ``len(self)`` slots (None: empty); views show the first ones (``shown``)."""
    __slots__ = ("n", "chunks")
    CHUNK = 64

    def __init__(self, n: int, chunks: dict[int, tuple[Any, ...]] | None = None) -> None:
        self.n, self.chunks = n, chunks if chunks is not None else {}

    def set(self, i: int, value: Any) -> Slots:
        """A new buffer with slot ``i`` (``0 <= i < len``) holding ``value``."""
        if self.n <= self.CHUNK:  # one chunk (nearly every node): no table to copy
            old = self.chunks.get(0) or (None,) * self.n
            return Slots(self.n, {0: old[:i] + (value,) + old[i + 1:]})
        c, j, size = divmod(i, self.CHUNK) + (self.CHUNK,)
        old = self.chunks.get(c) or (None,) * min(size, self.n - c * size)
        chunks = self.chunks.copy()
        chunks[c] = old[:j] + (value,) + old[j + 1:]
        return Slots(self.n, chunks)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, int) and -self.n <= i < self.n:
            c, j = divmod(i % self.n, self.CHUNK)
            chunk = self.chunks.get(c)
            return chunk[j] if chunk else None
        return tuple(self)[i]

    def __iter__(self) -> Any:
        return iter(self.head(self.n))

    def head(self, k: int) -> tuple[Any, ...]:
        """The first ``k`` slots (None: empty)."""
        out: list[Any] = []
        for c in range(0, (min(k, self.n) + self.CHUNK - 1) // self.CHUNK):
            chunk = self.chunks.get(c)
            out.extend(chunk if chunk else (None,) * min(self.CHUNK, self.n - c * self.CHUNK))
        return tuple(out[:k])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Slots):
            return self.n == other.n and all(
                self[c * self.CHUNK + j] == v for c, ch in (self.chunks | other.chunks).items()
                for j, v in enumerate(other.chunks.get(c) or (None,) * len(ch)))
        return isinstance(other, tuple) and len(other) == self.n and tuple(self) == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Slots({self.n}, {self.chunks!r})"


SLOTS_SHOWN = 16  # a view shows a buffer's first slots and "… N more"


def shown(slots: Any) -> tuple[list[tuple[int, Any]], int]:
    """The slots a view shows, ``[(k, summary or None)]``, and how many it leaves out."""
    if isinstance(slots, Slots):
        first = slots.head(SLOTS_SHOWN)
    else:
        first = tuple(slots)[:SLOTS_SHOWN]
    return list(enumerate(first)), len(slots) - len(first)


class ThreadState(NamedTuple):
    name: str
    state: str  # running | waiting | finished
    #: (on, target, holder) of its thread_wait, worded by ``words.wait_words``
    waiting_on: tuple[str, str, str | None] | None = None
    nodes: Stack = EMPTY_STACK  # (graph_task, node) stack, innermost last

    @property
    def node(self) -> int | None:
        return self.nodes[-1][1] if self.nodes else None

    @property
    def depth(self) -> int:
        return len(self.nodes)


Key = tuple[int | None, int]  # (graph_task, node)


class QueueTask(NamedTuple):
    """A task in a ready queue, as the views show it."""
    graph_task: int | None  # None: its GraphTask is gone (the task sorts first)
    node: int | None  # None: a dummy (wake-up) task
    depth: int
    seq: int | None


class GraphTaskRef:
    """What a queued task's weak pointer to its GraphTask reads: the GraphTask (its id and
    reentrant depth) while it lives, None once it is gone (``alive`` false), so that
    ``NodeTask.get_reentrant_depth`` reads INT_MAX.  Each state has its own (``copy``
    clones them), so the fold expires one in place, for every task that holds it."""
    __slots__ = ("id", "reentrant_depth", "alive")

    def __init__(self, gid: int | None, reentrant_depth: int, alive: bool = True) -> None:
        self.id, self.reentrant_depth, self.alive = gid, reentrant_depth, alive

    def __call__(self) -> GraphTaskRef | None:
        return self if self.alive else None

    @property
    def weak_self(self) -> GraphTaskRef:  # what NodeTask's constructor reads of a GraphTask
        return self


class TaskFn:
    """A queued task's node, as much of it as the comparator reads."""
    __slots__ = ("id", "_sequence_nr")

    def __init__(self, node: int, sequence_nr: int) -> None:
        self.id, self._sequence_nr = node, sequence_nr


class QueuedTask(NodeTask):
    """A task in the History's copy of a ready queue: the engine's own ``NodeTask``, so
    that the engine's comparator and heap code order it (one ordering, not a copy)."""
    __slots__ = ()

    def __init__(self, ref: GraphTaskRef, fn: TaskFn | None) -> None:
        NodeTask.__init__(self, ref, fn, None)  # type: ignore[arg-type]  # what it reads

    def view(self) -> QueueTask:
        gt, fn = self.base(), self.fn
        return QueueTask(gt.id if gt is not None else None, fn.id if fn is not None else None,
                         self.get_reentrant_depth(), fn._sequence_nr if fn is not None else None)

    def __eq__(self, other: object) -> bool:  # states compare equal by content
        return isinstance(other, QueuedTask) and self.view() == other.view()

    __hash__ = None  # type: ignore[assignment]


_new = tuple.__new__  # builds a NamedTuple from a tuple without its Python-level __new__
_get_node, _get_gt = operator.attrgetter("node"), operator.attrgetter("graph_task")
_get_id = operator.attrgetter("id")


@dataclass
class EngineState:
    index: int = 0  # how many events have been folded
    nodes: dict[int, NodeInfo] = field(default_factory=dict)
    node_states: dict[int, NodeState] = field(default_factory=dict)
    dependencies: dict[Key, int] = field(default_factory=dict)  # (gt, node) -> remaining
    # each ready queue as the engine keeps it: a heap (use queue_order for pop order)
    heaps: dict[str, list[QueuedTask]] = field(default_factory=dict)
    # GraphTask -> the weak pointer its queued tasks share (derived, so not compared)
    refs: dict[int, GraphTaskRef] = field(default_factory=dict, compare=False)
    buffers: dict[Key, Slots] = field(default_factory=dict)  # slot summaries
    not_ready: dict[Key, Slots | tuple[()]] = field(default_factory=dict)  # slot summaries
    graph_tasks: dict[int, GraphTaskState] = field(default_factory=dict)
    threads: dict[str, ThreadState] = field(default_factory=dict)
    leaf_grads: dict[int, Any] = field(default_factory=dict)  # AccumulateGrad id -> summary
    outputs: dict[int, Any] = field(default_factory=dict)  # id -> output summaries (raw list)
    last_event: Event | None = None
    deadlock: dict[str, Any] | None = None
    depth_priority: bool = True  # the engine option: which comparator the heaps use
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
            *copy_heaps(self.heaps), self.buffers.copy(), self.not_ready.copy(),
            self.graph_tasks.copy(), self.threads.copy(), self.leaf_grads.copy(),
            self.outputs.copy(), self.last_event, self.deadlock, self.depth_priority,
            self.node_meta.copy(),
        )

    def size(self) -> int:
        """Entries in all maps (what a copy costs)."""
        return sum(len(getattr(self, f)) for f in _NODE_MAPS + _PAIR_MAPS + (
            "graph_tasks", "threads")) + sum(map(len, self.heaps.values()))

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

    def compare(self) -> Any:
        return compare_node_task_time if self.depth_priority else compare_ignoring_depth

    def queue_order(self, q: str, limit: int | None = None) -> tuple[QueueTask, ...]:
        """Queue ``q`` in pop order (its first ``limit`` tasks): a copy of the heap
        drained with the engine's comparator."""
        heap = list(self.heaps.get(q, ()))
        comp = self.compare()
        n = len(heap) if limit is None else min(limit, len(heap))
        return tuple(pop_heap(heap, comp).view() for _ in range(n))

    def queue_len(self, q: str) -> int:
        return len(self.heaps.get(q, ()))

    def topological_order(self) -> list[int]:
        """Nodes from the roots to the leaves (higher topological number first)."""
        # one tuple per node, compared as tuples (a key that looked each node up twice
        # took 0.17 s for 117,390 nodes)
        return [t[2] for t in sorted([(-i.topo, -i.seq, n) for n, i in self.nodes.items()])]


def copy_heaps(heaps: dict[str, list[QueuedTask]]
               ) -> tuple[dict[str, list[QueuedTask]], dict[int, GraphTaskRef]]:
    """A copy of the heaps with tasks and weak pointers of their own (the fold sifts heaps
    and expires pointers in place), and those pointers by GraphTask."""
    clones: dict[int, GraphTaskRef] = {}  # id() of a pointer -> its clone
    out = {}
    for q, heap in heaps.items():
        new = []
        for t in heap:
            r = t.base
            mine = clones.get(id(r))
            if mine is None:
                mine = clones[id(r)] = GraphTaskRef(r.id, r.reentrant_depth, r.alive)
            new.append(QueuedTask(mine, t.fn))
        out[q] = new
    return out, {r.id: r for r in clones.values() if r.id is not None}


# --- what the fold records for History's snapshots ---------------------------------------
_NODE_MAPS = ("nodes", "node_states", "leaf_grads", "outputs", "node_meta")  # by node id
_PAIR_MAPS = ("dependencies", "buffers", "not_ready")  # keyed by (GraphTask, node)
_GONE = object()  # in a delta: the key was deleted


def _no_changes() -> dict[str, dict[Any, Any]]:
    return {name: {} for name in _NODE_MAPS + _PAIR_MAPS + ("graph_tasks",)}
