"""The fold: each event applied to an ``EngineState``, checked against it.

Not in PyTorch.  The seven kinds that make up nearly every event are handled
inline in ``_fold_into``, written for speed (plain dicts, ``tuple.__new__``
instead of ``NamedTuple._replace``): a loaded recording is folded once, whole;
the other kinds have a handler each in ``handlers.py``.  Folding also *validates*: an
event that contradicts the state raises ``StateError`` (see state.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from autograd_tui.engine.events import EVENT_TYPES, NULL, Event
from autograd_tui.engine.ready_queue import (
    compare_ignoring_depth,
    compare_node_task_time,
    pop_heap,
    push_heap,
)
from autograd_tui.history.checks import _bad_decrement, _bad_push, _no_gt, _no_node
from autograd_tui.history.handlers import _BY_TYPE, _free, _thread
from autograd_tui.history.state import (
    _GONE,
    EMPTY_STACK,
    EngineState,
    GraphTaskRef,
    GraphTaskState,
    NodeState,
    QueuedTask,
    Slots,
    StateError,
    TaskFn,
    ThreadState,
    _new,
)

_task, _fn, _slots = QueuedTask, TaskFn, Slots
_NO_REF = GraphTaskRef(None, 0, alive=False)  # a null weak pointer
_NO_QUEUE: list[QueuedTask] = []  # a push that names no queue


def apply(state: EngineState, event: Event) -> None:
    """Fold one event into ``state`` in place; raise StateError if it contradicts it."""
    _fold_into(state, (event,))


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
    heaps, buffers, graph_tasks, refs = s.heaps, s.buffers, s.graph_tasks, s.refs
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
                    slots = _slots(max(info.num_inputs, 1))
                slot = e.slot
                if not 0 <= slot < len(slots):
                    raise StateError(f"event {e.seq}: slot {slot} of {s.node_name(e.node)}, "
                                     f"which has {len(slots)} input(s)")
                if e.mode != "undefined":
                    slots = slots.set(slot, e.value)
                buffers[key] = c_buffers[key] = slots
            elif t is _PUSH:  # ReadyQueue::push: the task into the queue's heap
                if e.shutdown:
                    continue
                if e.gone:
                    _free(s, e)
                q = e.queue
                heap = heaps.get(q) if q is not None else _NO_QUEUE
                if heap is None:
                    heap = heaps[q] = []
                gid, node = e.graph_task, e.node
                if heap is _NO_QUEUE or e.size != len(heap) + 1:
                    raise _bad_push(e, heap)
                if gid is None:
                    ref = _NO_REF
                else:
                    ref = refs.get(gid)
                    if ref is None or not ref.alive:  # its first task queued (or a stale one)
                        gt = graph_tasks.get(gid)
                        if gt is None:
                            raise _no_gt(e, gid)
                        if gt.freed:
                            raise StateError(f"event {e.seq}: a push for GraphTask {gid}, "
                                             "which is gone")
                        ref = refs[gid] = GraphTaskRef(gid, gt.reentrant_depth)
                if node is not None:
                    if node not in nodes:
                        raise _no_node(s, e)
                    if type(e.seq_nr) is not int:
                        raise StateError(f"event {e.seq}: a push of a node needs its "
                                         "sequence number")
                    task = _task(ref, _fn(node, e.seq_nr))
                else:
                    task = _task(ref, None)
                if e.depth != task.get_reentrant_depth():
                    raise StateError(f"event {e.seq}: the task's depth is "
                                     f"{task.get_reentrant_depth()}, not {e.depth}")
                push_heap(heap, task, compare_node_task_time if s.depth_priority
                          else compare_ignoring_depth)
                if gid is not None:
                    gt = graph_tasks[gid]  # there: its pointer is
                    graph_tasks[gid] = c_gts[gid] = \
                        _new(GraphTaskState, gt[:-1] + (e.outstanding,))
                if node is not None:
                    node_states[node] = c_states[node] = _new(NodeState, ("ready", q, gid))
                    if buffers.pop((gid, node), _GONE) is not _GONE:
                        c_buffers[(gid, node)] = _GONE
            elif t is _POP:  # ReadyQueue::pop: the head of the heap, as the engine sorts it
                if e.shutdown:
                    continue
                if e.gone:
                    _free(s, e)
                q = e.queue
                heap = heaps.get(q) if q is not None else None
                if not heap:
                    raise StateError(f"event {e.seq}: pop from queue {q}, which is empty")
                if e.size != len(heap) - 1:
                    raise StateError(f"event {e.seq}: queue {q} holds {len(heap)} task(s), "
                                     f"so a pop leaves {len(heap) - 1}, not {e.size}")
                head = pop_heap(heap, compare_node_task_time if s.depth_priority
                                else compare_ignoring_depth)
                gt_alive, fn = head.base(), head.fn
                if (fn.id if fn is not None else None) != e.node or (
                        gt_alive.id if gt_alive is not None else None) != e.graph_task:
                    raise StateError(f"event {e.seq}: pop of {s.node_name(e.node)} from {q}, "
                                     "but the head of the queue is "
                                     f"{s.node_name(fn.id if fn is not None else None)}")
                if e.thread not in threads:
                    threads[e.thread] = ThreadState(e.thread, "running")
                node = e.node
                if node is not None and node_states[node][:2] == ("ready", q):
                    # out of the queue, not yet started: ready, at no queue (the queue
                    # pane no longer lists it, so its box must not name the queue)
                    node_states[node] = c_states[node] = \
                        _new(NodeState, ("ready", None, e.graph_task))
            elif t is _START:  # evaluate_function begins: push on the thread's stack
                node = e.node
                if node not in nodes:
                    raise _no_node(s, e)
                name, gid = e.thread, e.graph_task
                th = threads.get(name)
                stack = th[3] if th is not None else EMPTY_STACK
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


_DECREMENT, _ACCUMULATE = EVENT_TYPES["dependency_decrement"], EVENT_TYPES["buffer_accumulate"]
_PUSH, _POP = EVENT_TYPES["push"], EVENT_TYPES["pop"]
_START, _END = EVENT_TYPES["node_start"], EVENT_TYPES["node_end"]
_OUTSTANDING = EVENT_TYPES["outstanding_decrement"]
