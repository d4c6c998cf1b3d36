"""``EngineState``: everything a person can see, as a pure fold of events.

Not in PyTorch.  The app's panes, the Graphviz export and the text trace all
read this one structure; none of them re-derives state on its own.  Every
value inside is immutable (tuples, NamedTuples, frozen summaries), so a
snapshot is a handful of shallow dict copies and ``History.state_at(i)`` can
keep one every K events and fold forward from the nearest.

Folding also *validates*: an event that contradicts the state (a pop from an
empty queue or of a task that is not at its head, a dependency decremented
below zero, a not_ready entry removed that was never inserted, ...) raises
``StateError``.  Loading a recording uses this to reject tampered files.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .cowmap import CowMap
from .events import Event

NODE_STATES = ("not_reached", "not_ready", "ready", "running", "done", "skipped", "errored")


class StateError(ValueError):
    """An event that contradicts the state folded so far."""


class NodeInfo(NamedTuple):
    id: int
    name: str
    device: str
    seq: int
    topo: int
    num_inputs: int
    next: tuple[tuple[int | None, int], ...]
    leaf: bool


class NodeState(NamedTuple):
    state: str  # one of NODE_STATES
    where: str | None = None  # the queue (ready) or thread (running)
    graph_task: int | None = None


class QueueTask(NamedTuple):
    graph_task: int | None
    node: int | None  # None: a dummy (wake-up) task
    depth: int
    seq: int | None


class GraphTaskState(NamedTuple):
    id: int
    owner: str
    reentrant_depth: int
    keep_graph: bool
    create_graph: bool
    accumulate_grad: bool
    roots: tuple[int, ...]
    graph_root: int
    outstanding: int = 0
    completed: bool = False
    error: str | None = None
    needed: tuple[int, ...] | None = None  # exec_info (grad(), backward(inputs=...))
    parent: int | None = None  # the GraphTask whose node started this reentrant one
    handoff: str | None = None  # nested | pool | block


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


@dataclass
class EngineState:
    # The maps that grow with the graph are CowMaps (cheap snapshots; iteration is not in
    # insertion order); the small ones (queues, threads) are dicts in insertion order.
    index: int = 0  # how many events have been folded
    nodes: CowMap = field(default_factory=CowMap)  # id -> NodeInfo
    node_states: CowMap = field(default_factory=CowMap)  # id -> NodeState
    dependencies: CowMap = field(default_factory=CowMap)  # (gt, node) -> remaining
    queues: dict[str, tuple[QueueTask, ...]] = field(default_factory=dict)
    buffers: CowMap = field(default_factory=CowMap)  # (gt, node) -> slot summaries
    not_ready: CowMap = field(default_factory=CowMap)  # (gt, node) -> slot summaries
    graph_tasks: CowMap = field(default_factory=CowMap)  # id -> GraphTaskState
    threads: dict[str, ThreadState] = field(default_factory=dict)
    leaf_grads: CowMap = field(default_factory=CowMap)  # AccumulateGrad id -> summary
    outputs: CowMap = field(default_factory=CowMap)  # id -> output gradient summaries
    last_event: Event | None = None
    deadlock: dict[str, Any] | None = None

    # --- copies ---------------------------------------------------------------------------
    def copy(self) -> EngineState:
        return EngineState(
            self.index, self.nodes.copy(), self.node_states.copy(), self.dependencies.copy(),
            dict(self.queues), self.buffers.copy(), self.not_ready.copy(),
            self.graph_tasks.copy(), dict(self.threads), self.leaf_grads.copy(),
            self.outputs.copy(), self.last_event, self.deadlock,
        )

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

    # --- the fold -------------------------------------------------------------------
    def apply(self, e: Event) -> None:
        """Fold one event in; raise StateError if it contradicts the state."""
        handler = _HANDLERS.get(e.kind)
        if handler is not None:
            handler(self, e)
        self.index += 1
        self.last_event = e

    def _node(self, node: int | None, e: Event) -> int:
        if node is None:
            raise StateError(f"event {e.seq} ({e.kind}) names no node")
        if node not in self.nodes:
            raise StateError(f"event {e.seq} ({e.kind}) names node {node}, which no "
                             "dependencies_computed event introduced")
        return node

    def _set_node(self, node: int, state: str, where: str | None, gt: int | None) -> None:
        self.node_states[node] = NodeState(state, where, gt)

    def _thread(self, name: str) -> ThreadState:
        t = self.threads.get(name)
        if t is None:
            t = ThreadState(name, "running")
            self.threads[name] = t
        return t

    def _gt(self, gid: int | None, e: Event) -> GraphTaskState:
        if gid is None or gid not in self.graph_tasks:
            raise StateError(f"event {e.seq} ({e.kind}) names GraphTask {gid}, which was "
                             "never created")
        return self.graph_tasks[gid]


def _graph_task_created(s: EngineState, e: Event) -> None:
    d = e.data
    if e.graph_task in s.graph_tasks:
        raise StateError(f"event {e.seq}: GraphTask {e.graph_task} created twice")
    parent = None
    owner = s._thread(e.thread)
    if owner.nodes:
        parent = owner.nodes[-1][0]
    s.graph_tasks[e.graph_task] = GraphTaskState(  # type: ignore[index]
        e.graph_task, e.thread, d["reentrant_depth"], d["keep_graph"], d["create_graph"],  # type: ignore[arg-type]
        d["accumulate_grad"], tuple(d["roots"]), d["graph_root"], parent=parent)


def _dependencies_computed(s: EngineState, e: Event) -> None:
    gt = s._gt(e.graph_task, e)
    for n in e.data["nodes"]:
        s.nodes[n["id"]] = NodeInfo(n["id"], n["name"], n["device"], n["seq"], n["topo"],
                                    n["num_inputs"], tuple((a, b) for a, b in n["next"]),
                                    n["leaf"])
        s.node_states[n["id"]] = NodeState("not_reached", None, gt.id)
    for node, count in e.data["dependencies"]:
        s.dependencies[(gt.id, int(node))] = count


def _exec_info(s: EngineState, e: Event) -> None:
    gt = s._gt(e.graph_task, e)
    s.graph_tasks[gt.id] = gt._replace(needed=tuple(e.data["needed"]))


def _push(s: EngineState, e: Event) -> None:
    q = e.queue
    assert q is not None
    old = s.queues.get(q, ())
    new = tuple(QueueTask(*t) for t in e.data["order"])
    task = QueueTask(e.graph_task, e.node, e.data["depth"], e.data["seq"])
    if e.data["shutdown"]:
        return
    if sorted(map(_sort_key, old + (task,))) != sorted(map(_sort_key, new)):
        raise StateError(f"event {e.seq}: push to {q} leaves the queue as {list(new)}, which "
                         f"is not the queue before ({list(old)}) plus the pushed task")
    s.queues[q] = new
    if e.graph_task is not None:
        gt = s._gt(e.graph_task, e)
        s.graph_tasks[gt.id] = gt._replace(outstanding=e.data["outstanding"])
    if e.node is not None:
        s._node(e.node, e)
        s._set_node(e.node, "ready", q, e.graph_task)
        s.buffers.pop((e.graph_task, e.node), None)


def _sort_key(t: QueueTask) -> tuple[Any, ...]:
    return (t.graph_task or 0, t.node or 0, t.depth, t.seq or 0)


def _pop(s: EngineState, e: Event) -> None:
    if e.data["shutdown"]:
        return
    q = e.queue
    assert q is not None
    old = s.queues.get(q, ())
    if not old:
        raise StateError(f"event {e.seq}: pop from queue {q}, which is empty")
    head = old[0]
    if (head.graph_task, head.node) != (e.graph_task, e.node) and not e.data["expired"]:
        raise StateError(f"event {e.seq}: pop of {s.node_name(e.node)} from {q}, but the head "
                         f"of the queue is {s.node_name(head.node)}")
    s.queues[q] = old[1:]
    s._thread(e.thread)


def _dependency_decrement(s: EngineState, e: Event) -> None:
    node = s._node(e.node, e)
    key = (e.graph_task, node)
    old = s.dependencies.get(key)
    if old is None or old < 1:
        raise StateError(f"event {e.seq}: dependencies of {s.node_name(node)} would go below "
                         "zero")
    if e.data["remaining"] != old - 1:
        raise StateError(f"event {e.seq}: dependencies of {s.node_name(node)} go from {old} to "
                         f"{e.data['remaining']}, not {old - 1}")
    s.dependencies[key] = old - 1


def _buffer_accumulate(s: EngineState, e: Event) -> None:
    node = s._node(e.node, e)
    key = (e.graph_task, node)
    slots = list(s.buffers.get(key) or (None,) * max(s.nodes[node].num_inputs, 1))
    slot = e.data["slot"]
    if not 0 <= slot < len(slots):
        raise StateError(f"event {e.seq}: slot {slot} of {s.node_name(node)}, which has "
                         f"{len(slots)} inputs")
    if e.data["mode"] != "undefined":
        slots[slot] = e.data["value"]
    s.buffers[key] = tuple(slots)


def _not_ready_insert(s: EngineState, e: Event) -> None:
    node = s._node(e.node, e)
    key = (e.graph_task, node)
    if key in s.not_ready:
        raise StateError(f"event {e.seq}: {s.node_name(node)} inserted into not_ready twice")
    s.not_ready[key] = s.buffers.get(key, ())
    s._set_node(node, "not_ready", None, e.graph_task)


def _not_ready_remove(s: EngineState, e: Event) -> None:
    node = s._node(e.node, e)
    key = (e.graph_task, node)
    if key not in s.not_ready:
        raise StateError(f"event {e.seq}: {s.node_name(node)} removed from not_ready, where "
                         "it is not")
    del s.not_ready[key]


def _node_start(s: EngineState, e: Event) -> None:
    node = s._node(e.node, e)
    t = s._thread(e.thread)
    s.threads[e.thread] = t._replace(state="running", waiting_on=None,
                                     nodes=t.nodes + ((e.graph_task, node),))
    s._set_node(node, "running", e.thread, e.graph_task)


def _finish_node(s: EngineState, e: Event, state: str) -> None:
    node = s._node(e.node, e)
    t = s._thread(e.thread)
    if t.nodes and t.nodes[-1][1] == node:
        s.threads[e.thread] = t._replace(nodes=t.nodes[:-1])
    s._set_node(node, state, None, e.graph_task)


def _node_end(s: EngineState, e: Event) -> None:
    _finish_node(s, e, "done")
    s.outputs[e.node] = tuple(e.data["outputs"])  # type: ignore[index]
    if e.data.get("leaf_grad") is not None:
        s.leaf_grads[e.node] = e.data["leaf_grad"]  # type: ignore[index]


def _node_skipped(s: EngineState, e: Event) -> None:
    node = s._node(e.node, e)
    s._set_node(node, "skipped", None, e.graph_task)


def _outstanding_decrement(s: EngineState, e: Event) -> None:
    gt = s._gt(e.graph_task, e)
    if e.data["outstanding"] != gt.outstanding - 1 or e.data["outstanding"] < 0:
        raise StateError(f"event {e.seq}: outstanding_tasks of GraphTask {gt.id} goes from "
                         f"{gt.outstanding} to {e.data['outstanding']}")
    s.graph_tasks[gt.id] = gt._replace(outstanding=e.data["outstanding"])


def _completion(s: EngineState, e: Event) -> None:
    gt = s._gt(e.graph_task, e)
    s.graph_tasks[gt.id] = gt._replace(completed=True, error=e.data["error"])


def _error(s: EngineState, e: Event) -> None:
    if e.node is not None:
        _finish_node(s, e, "errored")
    if e.graph_task is not None:
        gt = s._gt(e.graph_task, e)
        s.graph_tasks[gt.id] = gt._replace(error=e.data["message"])


def _reentrant_handoff(s: EngineState, e: Event) -> None:
    gt = s._gt(e.graph_task, e)
    s.graph_tasks[gt.id] = gt._replace(handoff=e.data["mode"],
                                       parent=e.data["parent_graph_task"])


def _thread_start(s: EngineState, e: Event) -> None:
    s.threads[e.thread] = ThreadState(e.thread, "running")


def _thread_exit(s: EngineState, e: Event) -> None:
    s.threads[e.thread] = ThreadState(e.thread, "finished")


def _thread_wait(s: EngineState, e: Event) -> None:
    t = s._thread(e.thread)
    what = e.data["target"]
    on = e.data["on"]
    label = {"queue": f"queue {what}", "future": f"the future of {what}",
             "lock": f"lock '{what}'", "signal": f"signal '{what}'"}.get(on, what)
    if e.data.get("holder"):
        label += f" held by {e.data['holder']}"
    s.threads[e.thread] = t._replace(state="waiting", waiting_on=label)


def _thread_wake(s: EngineState, e: Event) -> None:
    t = s._thread(e.thread)
    s.threads[e.thread] = t._replace(state="running", waiting_on=None)


def _deadlock(s: EngineState, e: Event) -> None:
    s.deadlock = dict(e.data)


_HANDLERS = {
    "graph_task_created": _graph_task_created,
    "dependencies_computed": _dependencies_computed,
    "exec_info": _exec_info,
    "push": _push,
    "pop": _pop,
    "dependency_decrement": _dependency_decrement,
    "buffer_accumulate": _buffer_accumulate,
    "not_ready_insert": _not_ready_insert,
    "not_ready_remove": _not_ready_remove,
    "node_start": _node_start,
    "node_end": _node_end,
    "node_skipped": _node_skipped,
    "outstanding_decrement": _outstanding_decrement,
    "completion": _completion,
    "error": _error,
    "reentrant_handoff": _reentrant_handoff,
    "thread_start": _thread_start,
    "thread_exit": _thread_exit,
    "thread_wait": _thread_wait,
    "thread_wake": _thread_wake,
    "deadlock": _deadlock,
}


def fold(events: Iterable[Event], state: EngineState | None = None) -> EngineState:
    s = state.copy() if state is not None else EngineState()
    for e in events:
        s.apply(e)
    return s


class History:
    """Events with snapshots every ``every`` events: ``state_at(i)`` in either direction.

    ``state_at(i)`` is the state after the first ``i`` events (``state_at(0)`` is
    empty).  Live runs append as events arrive; a loaded recording is appended
    once.  Snapshots are taken on the way, so seeking costs one snapshot copy and
    at most ``every - 1`` folds.
    """

    def __init__(self, events: Sequence[Event] = (), every: int = 256) -> None:
        if every < 1:
            raise ValueError("every must be >= 1")
        self.every = every
        self.events: list[Event] = []
        self._snap_index: list[int] = [0]
        self._snaps: list[EngineState] = [EngineState()]
        self._head = EngineState()
        self.extend(events)

    def __len__(self) -> int:
        return len(self.events)

    def append(self, event: Event) -> None:
        """Fold one more event (raises StateError and keeps nothing if it contradicts)."""
        trial = self._head
        try:
            trial.apply(event)
        except StateError:
            # roll back: refold from the last snapshot (the failed apply may be partial)
            self._head = fold(self.events[self._snap_index[-1]:], self._snaps[-1])
            raise
        self.events.append(event)
        if len(self.events) % self.every == 0:
            self._snap_index.append(len(self.events))
            self._snaps.append(self._head.copy())

    def extend(self, events: Iterable[Event]) -> None:
        for e in events:
            self.append(e)

    @property
    def head(self) -> EngineState:
        """The state after every event so far (do not mutate)."""
        return self._head

    def state_at(self, i: int) -> EngineState:
        n = len(self.events)
        if not 0 <= i <= n:
            raise IndexError(f"event index {i} is outside 0..{n}")
        if i == n:
            return self._head.copy()
        k = bisect.bisect_right(self._snap_index, i) - 1
        return fold(self.events[self._snap_index[k]:i], self._snaps[k])
