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

import bisect
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from autograd_tui.engine.events import EVENT_TYPES, NULL, SCHEMA, Event, NodeInfo, QueueTask

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
            self.outputs.copy(), self.last_event, self.deadlock,
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

    # --- the fold -------------------------------------------------------------------
    def apply(self, e: Event) -> None:
        """Fold one event in; raise StateError if it contradicts the state."""
        _fold_into(self, (e,))


def _no_node(s: EngineState, e: Event) -> StateError:
    if e.node is None:
        return StateError(f"event {e.seq} ({e.kind}) names no node")
    return StateError(f"event {e.seq} ({e.kind}) names node {e.node}, which no "
                      "dependencies_computed event introduced")


def _no_gt(e: Event, gid: int | None) -> StateError:
    return StateError(f"event {e.seq} ({e.kind}) names GraphTask {gid}, which was never created")


def _thread(s: EngineState, name: str) -> ThreadState:
    t = s.threads.get(name)
    if t is None:
        t = s.threads[name] = ThreadState(name, "running")
    return t


def _graph_task_created(s: EngineState, e: Any) -> None:
    gid = e.graph_task
    if gid is None:
        raise _no_gt(e, gid)
    if gid in s.graph_tasks:
        raise StateError(f"event {e.seq}: GraphTask {gid} created twice")
    owner = _thread(s, e.thread)
    parent = owner.nodes[-1][0] if owner.nodes else None
    s.graph_tasks[gid] = GraphTaskState(
        gid, e.thread, e.reentrant_depth, e.keep_graph, e.create_graph, e.accumulate_grad,
        tuple(e.roots), e.graph_root, parent=parent)


def _dependencies_computed(s: EngineState, e: Any) -> None:
    gid = e.graph_task
    if gid not in s.graph_tasks:
        raise _no_gt(e, gid)
    infos: list[NodeInfo] = e.nodes  # decoded (and type-checked) as NodeInfo tuples
    ids = list(map(_get_id, infos))
    fresh = dict(zip(ids, infos))
    states = dict.fromkeys(ids, NodeState("not_reached", None, gid))
    counts = {(gid, int(node)): count for node, count in e.dependencies}
    for name, new in (("nodes", fresh), ("node_states", states), ("dependencies", counts)):
        getattr(s, name).update(new)
        s.changes[name].update(new)  # History's next delta (see _fold_into)


def _exec_info(s: EngineState, e: Any) -> None:
    gt = s.graph_tasks.get(e.graph_task)
    if gt is None:
        raise _no_gt(e, e.graph_task)
    s.graph_tasks[gt.id] = gt._replace(needed=tuple(e.needed))


def _key(t: Sequence[Any]) -> tuple[Any, ...]:
    return (t[0] or 0, t[1] or 0, t[2], t[3] or 0)


def _same_plus(new: tuple[Any, ...], old: tuple[Any, ...], task: tuple[Any, ...]) -> bool:
    """Is ``new`` (as a multiset) ``old`` plus ``task``?  Sets when nothing repeats."""
    if len(new) != len(old) + 1:
        return False
    sn, so = set(new), set(old)
    if len(sn) == len(new) and len(so) == len(old):
        return task in sn and task not in so and sn.issuperset(so)
    return sorted(map(_key, new)) == sorted(map(_key, old + (task,)))


def _not_ready_insert(s: EngineState, e: Any) -> None:
    node = e.node
    if node not in s.nodes:
        raise _no_node(s, e)
    key = (e.graph_task, node)
    if key in s.not_ready:
        raise StateError(f"event {e.seq}: {s.node_name(node)} inserted into not_ready twice")
    s.not_ready[key] = s.buffers.get(key, ())
    s.node_states[node] = _new(NodeState, ("not_ready", None, e.graph_task))


def _not_ready_remove(s: EngineState, e: Any) -> None:
    node = e.node
    if node not in s.nodes:
        raise _no_node(s, e)
    key = (e.graph_task, node)
    if key not in s.not_ready:
        raise StateError(f"event {e.seq}: {s.node_name(node)} removed from not_ready, where "
                         "it is not")
    del s.not_ready[key]


def _finish_node(s: EngineState, e: Any, state: str) -> None:
    node = e.node
    if node not in s.nodes:
        raise _no_node(s, e)
    t = s.threads.get(e.thread) or _thread(s, e.thread)
    stack = t[3]
    if stack and stack[-1][1] == node:
        s.threads[e.thread] = _new(ThreadState, (t[0], t[1], t[2], stack[:-1]))
    s.node_states[node] = _new(NodeState, (state, None, e.graph_task))


def _node_skipped(s: EngineState, e: Any) -> None:
    node = e.node
    if node not in s.nodes:
        raise _no_node(s, e)
    s.node_states[node] = _new(NodeState, ("skipped", None, e.graph_task))


def _completion(s: EngineState, e: Any) -> None:
    gt = s.graph_tasks.get(e.graph_task)
    if gt is None:
        raise _no_gt(e, e.graph_task)
    s.graph_tasks[gt.id] = gt._replace(completed=True, error=e.error)


def _error(s: EngineState, e: Any) -> None:
    if e.node is not None:
        _finish_node(s, e, "errored")
    if e.graph_task is not None:
        gt = s.graph_tasks.get(e.graph_task)
        if gt is None:
            raise _no_gt(e, e.graph_task)
        s.graph_tasks[gt.id] = gt._replace(error=e.message)


def _reentrant_handoff(s: EngineState, e: Any) -> None:
    gt = s.graph_tasks.get(e.graph_task)
    if gt is None:
        raise _no_gt(e, e.graph_task)
    s.graph_tasks[gt.id] = gt._replace(handoff=e.mode, parent=e.parent_graph_task)


def _thread_start(s: EngineState, e: Any) -> None:
    s.threads[e.thread] = ThreadState(e.thread, "running")


def _thread_exit(s: EngineState, e: Any) -> None:
    s.threads[e.thread] = ThreadState(e.thread, "finished")


_WAIT_LABEL = {"queue": "queue {}", "future": "the future of {}", "lock": "lock '{}'",
               "signal": "signal '{}'"}


def _thread_wait(s: EngineState, e: Any) -> None:
    t = _thread(s, e.thread)
    label = _WAIT_LABEL.get(e.on, "{}").format(e.target)
    if e.holder:
        label += f" held by {e.holder}"
    s.threads[e.thread] = _new(ThreadState, (t.name, "waiting", label, t.nodes))


def _thread_wake(s: EngineState, e: Any) -> None:
    t = _thread(s, e.thread)
    s.threads[e.thread] = _new(ThreadState, (t.name, "running", None, t.nodes))


def _deadlock(s: EngineState, e: Any) -> None:
    s.deadlock = e.data


def _nothing(s: EngineState, e: Any) -> None:
    pass


_HANDLERS = {  # the kinds _fold_into does not handle inline
    "graph_task_created": _graph_task_created,
    "dependencies_computed": _dependencies_computed,
    "exec_info": _exec_info,
    "not_ready_insert": _not_ready_insert,
    "not_ready_remove": _not_ready_remove,
    "node_skipped": _node_skipped,
    "completion": _completion,
    "error": _error,
    "reentrant_handoff": _reentrant_handoff,
    "thread_start": _thread_start,
    "thread_exit": _thread_exit,
    "thread_wait": _thread_wait,
    "thread_wake": _thread_wake,
    "deadlock": _deadlock,
}
_HANDLERS.update({k: _nothing for k in SCHEMA if k not in _HANDLERS})  # hook, wakeup: no state
_BY_TYPE = {EVENT_TYPES[k]: h for k, h in _HANDLERS.items()}  # type(e): cheaper than e.kind


def fold(events: Iterable[Event], state: EngineState | None = None) -> EngineState:
    """The state after ``events``, starting from a copy of ``state`` (or empty)."""
    s = state.copy() if state is not None else EngineState()
    _fold_into(s, events if isinstance(events, list) else list(events))
    return s


def _fold_into(s: EngineState, events: Sequence[Event]) -> None:
    """Fold in place.  On an error the exception gets ``index``: the position in
    ``events`` of the event that failed (``s`` is then partly updated).

    The seven kinds that make up nearly every event are handled inline, with the
    maps in local variables: a loaded recording is folded whole, and a function
    call and a few attribute lookups per event are a third of the time."""
    nodes, node_states, deps = s.nodes, s.node_states, s.dependencies
    queues, buffers, graph_tasks = s.queues, s.buffers, s.graph_tasks
    threads, outputs, leaf_grads = s.threads, s.outputs, s.leaf_grads
    # every write also goes to s.changes (c_*): History's next delta, at no extra pass
    ch = s.changes
    c_states, c_deps, c_buffers = ch["node_states"], ch["dependencies"], ch["buffers"]
    c_gts, c_outputs, c_leaf = ch["graph_tasks"], ch["outputs"], ch["leaf_grads"]
    rare, rare_seen = _BY_TYPE, s.rare
    e: Any = None
    try:
        for e in events:
            t = type(e)
            if t is _DECREMENT:  # dependencies[node] -= 1, never below zero
                key = (e.graph_task, e.node)
                old = deps.get(key)  # only dependencies_computed makes keys: a known node
                if old is None or old < 1 or e.remaining != old - 1:
                    raise _no_node(s, e) if e.node not in nodes else \
                        _bad_decrement(s, e, old)
                deps[key] = c_deps[key] = old - 1
            elif t is _ACCUMULATE:  # InputBuffer::add into one slot
                key = (e.graph_task, e.node)
                slots = buffers.get(key)  # a buffer only exists for a known node
                if not slots:
                    info = nodes.get(e.node)
                    if info is None:
                        raise _no_node(s, e)
                    slots = (None,) * max(info.num_inputs, 1)
                slot = e.slot
                if not 0 <= slot < len(slots):
                    raise StateError(f"event {e.seq}: slot {slot} of {s.node_name(e.node)}, "
                                     f"which has {len(slots)} input(s)")
                if e.mode != "undefined":
                    slots = (e.value,) if len(slots) == 1 else \
                        slots[:slot] + (e.value,) + slots[slot + 1:]
                buffers[key] = c_buffers[key] = slots
            elif t is _PUSH:  # ReadyQueue::push: the queue after it, in pop order
                if e.shutdown:
                    continue
                q = e.queue
                old_q = queues.get(q, ())
                gid, node = e.graph_task, e.node
                new = tuple(e.order)  # QueueTask tuples, as decoded
                task = (gid, node, e.depth, e.seq_nr)
                n_old = len(old_q)
                if q is None or len(new) != n_old + 1 or not (
                        new[0] == task if n_old == 0 else
                        (new[0] == task and new[1] == old_q[0]) or
                        (new[1] == task and new[0] == old_q[0]) if n_old == 1 else
                        _same_plus(new, old_q, task)):
                    raise _bad_push(e, old_q)
                queues[q] = new
                if gid is not None:
                    gt = graph_tasks.get(gid)
                    if gt is None:
                        raise _no_gt(e, gid)
                    graph_tasks[gid] = c_gts[gid] = \
                        _new(GraphTaskState, gt[:-1] + (e.outstanding,))
                if node is not None:
                    if node not in nodes:
                        raise _no_node(s, e)
                    node_states[node] = c_states[node] = _new(NodeState, ("ready", q, gid))
                    if buffers.pop((gid, node), _GONE) is not _GONE:
                        c_buffers[(gid, node)] = _GONE
            elif t is _POP:  # ReadyQueue::pop: the head, unless its GraphTask is gone
                if e.shutdown:
                    continue
                q = e.queue
                old_q = queues.get(q)
                if not old_q:
                    raise StateError(f"event {e.seq}: pop from queue {q}, which is empty")
                head = old_q[0]
                if (head[0] != e.graph_task or head[1] != e.node) and not e.expired:
                    raise StateError(f"event {e.seq}: pop of {s.node_name(e.node)} from {q}, "
                                     f"but the head of the queue is {s.node_name(head.node)}")
                queues[q] = old_q[1:]
                if e.thread not in threads:
                    threads[e.thread] = ThreadState(e.thread, "running")
            elif t is _START:  # evaluate_function begins: push on the thread's stack
                node = e.node
                if node not in nodes:
                    raise _no_node(s, e)
                name, gid = e.thread, e.graph_task
                th = threads.get(name)
                stack = th[3] if th is not None else ()
                threads[name] = _new(ThreadState, (name, "running", None, stack + ((gid, node),)))
                node_states[node] = c_states[node] = _new(NodeState, ("running", name, gid))
            elif t is _END:  # ... and ends: outputs, and the leaf's .grad for AccumulateGrad
                node, name = e.node, e.thread
                if node not in nodes:
                    raise _no_node(s, e)
                th = threads.get(name) or _thread(s, name)
                stack = th[3]
                if stack and stack[-1][1] == node:
                    threads[name] = _new(ThreadState, (th[0], th[1], th[2], stack[:-1]))
                node_states[node] = c_states[node] = \
                    _new(NodeState, ("done", None, e.graph_task))
                outputs[node] = c_outputs[node] = e.outputs
                if len(e.leaf_grad) != 4 or e.leaf_grad != NULL:  # len first: cheaper than ==
                    leaf_grads[node] = c_leaf[node] = e.leaf_grad
            elif t is _OUTSTANDING:  # --outstanding_tasks after a task
                gt = graph_tasks.get(e.graph_task)
                if gt is None:
                    raise _no_gt(e, e.graph_task)
                n = e.outstanding
                if n != gt[-1] - 1 or n < 0:
                    raise StateError(f"event {e.seq}: outstanding_tasks of GraphTask {gt.id} "
                                     f"goes from {gt.outstanding} to {n}")
                graph_tasks[gt[0]] = c_gts[gt[0]] = _new(GraphTaskState, gt[:-1] + (n,))
            else:
                rare[t](s, e)
                rare_seen.append(e)
    except Exception as err:
        i = next(k for k, x in enumerate(events) if x is e)  # found on errors only
        s.index += i
        err.index = i  # type: ignore[attr-defined]
        raise
    if events:
        s.index += len(events)
        s.last_event = events[-1]


def _bad_decrement(s: EngineState, e: Any, old: int | None) -> StateError:
    name = s.node_name(e.node)
    if old is None or old < 1:
        return StateError(f"event {e.seq}: dependencies of {name} would go below zero")
    return StateError(f"event {e.seq}: dependencies of {name} go from {old} to "
                      f"{e.remaining}, not {old - 1}")


def _bad_push(e: Any, old: tuple[QueueTask, ...]) -> StateError:
    if e.queue is None:
        return StateError(f"event {e.seq} (push) names no queue")
    return StateError(f"event {e.seq}: push to {e.queue} leaves the queue as "
                      f"{[list(t) for t in e.order]}, which is not the queue before "
                      f"({[list(t) for t in old]}) plus the pushed task")


_DECREMENT, _ACCUMULATE = EVENT_TYPES["dependency_decrement"], EVENT_TYPES["buffer_accumulate"]
_PUSH, _POP = EVENT_TYPES["push"], EVENT_TYPES["pop"]
_START, _END = EVENT_TYPES["node_start"], EVENT_TYPES["node_end"]
_OUTSTANDING = EVENT_TYPES["outstanding_decrement"]


# --- History --------------------------------------------------------------------------------
_NODE_MAPS = ("nodes", "node_states", "leaf_grads", "outputs")  # keyed by node id
_PAIR_MAPS = ("dependencies", "buffers", "not_ready")  # keyed by (GraphTask, node)
_GONE = object()  # in a delta: the key was deleted




class _Delta(NamedTuple):
    maps: dict[str, dict[Any, Any]]  # field -> {key: value or _GONE}
    queues: dict[str, tuple[QueueTask, ...]]
    threads: dict[str, ThreadState]
    index: int
    last_event: Event | None
    deadlock: dict[str, Any] | None
    gone: tuple[tuple[str, list[Any]], ...] = ()  # (map, keys deleted): found once, here


def _no_changes() -> dict[str, dict[Any, Any]]:
    return {name: {} for name in _NODE_MAPS + _PAIR_MAPS + ("graph_tasks",)}


def _delta(s: EngineState) -> _Delta:
    """What changed since the last snapshot: the entries the fold wrote inline (and
    dependencies_computed), plus those of the other events (each changes only
    entries keyed by its node, its (GraphTask, node) or its GraphTask), looked up
    now.  Takes ``s.changes`` and ``s.rare`` and starts them afresh."""
    maps, rare = s.changes, s.rare
    s.changes, s.rare = _no_changes(), []
    if rare:
        nodes = set(map(_get_node, rare))
        nodes.discard(None)
        gts = set(map(_get_gt, rare))
        gts.discard(None)
        for name in _NODE_MAPS:  # never deleted from
            m = getattr(s, name)
            maps[name].update({k: m[k] for k in nodes if k in m})
        pairs = [(g, n) for g in gts for n in nodes]
        for name in _PAIR_MAPS:
            m = getattr(s, name)
            maps[name].update({k: m.get(k, _GONE) for k in pairs})
        maps["graph_tasks"].update({k: s.graph_tasks[k] for k in gts if k in s.graph_tasks})
    gone = tuple((name, keys) for name in _PAIR_MAPS
                 if (keys := [k for k, v in maps[name].items() if v is _GONE]))
    return _Delta(maps, s.queues.copy(), s.threads.copy(), s.index, s.last_event, s.deadlock,
                  gone)


def _apply_delta(s: EngineState, d: _Delta) -> None:
    for name, changes in d.maps.items():
        getattr(s, name).update(changes)
    for name, keys in d.gone:
        pop = getattr(s, name).pop
        for k in keys:
            pop(k, None)
    s.queues, s.threads = d.queues.copy(), d.threads.copy()
    s.index, s.last_event, s.deadlock = d.index, d.last_event, d.deadlock


class History:
    """Events with snapshots every ``every`` events: ``state_at(i)`` in either direction.

    ``state_at(i)`` is the state after the first ``i`` events (``state_at(0)`` is
    empty).  Live runs append as events arrive; a loaded recording is extended
    once.  A snapshot is a delta (the entries the last ``every`` events touched)
    or, once the deltas since the last checkpoint hold a quarter as many entries
    as the state, a checkpoint (a full copy): a seek costs one copy, at most that
    many delta entries and fewer than ``every`` folds.
    """

    def __init__(self, events: Sequence[Event] = (), every: int = 1024,
                 min_checkpoint: int = 20_000) -> None:
        if every < 1:
            raise ValueError("every must be >= 1")
        self.every = every
        self.min_checkpoint = min_checkpoint
        self.events: list[Event] = []
        self._snap_index: list[int] = [0]
        self._snaps: list[EngineState | _Delta] = [EngineState()]
        self._ckpt_of: list[int] = [0]  # per snapshot: the position of its checkpoint
        self._since_ckpt = 0  # delta entries since the last checkpoint
        self._head = EngineState()
        # a person steps back and forth in one place: the state at the start of the
        # interval stepped in (built by the second seek into it) spares the deltas
        self._last_k = -1
        self._near: tuple[int, EngineState] | None = None
        self.extend(events)

    def __len__(self) -> int:
        return len(self.events)

    def append(self, event: Event) -> None:
        """Fold one more event (raises StateError and keeps nothing if it contradicts)."""
        self.extend((event,))

    def extend(self, events: Iterable[Event]) -> None:
        """Fold ``events`` in order.  If one contradicts the state, the ones before it
        are kept, the error is raised with ``index`` (its position in ``events``) and
        the head is the state before it."""
        evs = events if isinstance(events, (list, tuple)) else list(events)
        start = 0
        while start < len(evs):
            n = len(self.events)
            room = self.every - n % self.every  # events until the next snapshot
            chunk = evs[start:start + room]
            try:
                _fold_into(self._head, chunk)
            except Exception as err:
                done = err.index  # type: ignore[attr-defined]
                self.events.extend(chunk[:done])
                self._head = fold(self.events[self._snap_index[-1]:],
                                  self._state_of(len(self._snaps) - 1))
                err.index = start + done  # type: ignore[attr-defined]
                raise
            self.events.extend(chunk)
            start += len(chunk)
            if len(self.events) % self.every == 0:
                self._snapshot()

    def _snapshot(self) -> None:
        n = len(self.events)
        d = _delta(self._head)
        self._since_ckpt += sum(map(len, d.maps.values()))
        self._snap_index.append(n)
        if self._since_ckpt >= max(self._head.size() // 4, self.min_checkpoint):
            self._snaps.append(self._head.copy())
            self._ckpt_of.append(len(self._snaps) - 1)
            self._since_ckpt = 0
        else:
            self._snaps.append(d)
            self._ckpt_of.append(self._ckpt_of[-1])

    def _state_of(self, k: int) -> EngineState:
        """A fresh copy of the state at snapshot ``k``."""
        c = self._ckpt_of[k]
        base = self._snaps[c]
        assert isinstance(base, EngineState)
        s = base.copy()
        for j in range(c + 1, k + 1):
            d = self._snaps[j]
            assert isinstance(d, _Delta)
            _apply_delta(s, d)
        return s

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
        if self._near is not None and self._near[0] == k:
            s = self._near[1].copy()
        else:
            s = self._state_of(k)
            if self._last_k == k:  # stepping within one interval: keep its start state
                self._near = (k, s.copy())
            self._last_k = k
        _fold_into(s, self.events[self._snap_index[k]:i])
        return s
