"""The fold's handlers of the rarer event kinds, one per kind (``fold.py`` handles the
seven kinds that make up nearly every event inline, and calls these for the rest).

Not in PyTorch.  Each applies one event to an ``EngineState`` in place and raises
``StateError`` when the event contradicts it.  ``_free`` expires GraphTasks named in
``gone`` (push and pop call it before they sort their queue).
"""

from __future__ import annotations

from typing import Any

from autograd_tui.engine.events import EVENT_TYPES, SCHEMA
from autograd_tui.history.checks import _check_nodes, _no_gt, _no_node
from autograd_tui.history.state import (
    EngineState,
    GraphTaskState,
    NodeInfo,
    NodeState,
    StateError,
    ThreadState,
    _get_id,
    _new,
)


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
        tuple(e.roots), e.graph_root, parent=parent, created=e.seq)
    s.depth_priority = e.depth_priority


def _free(s: EngineState, e: Any) -> None:
    """GraphTasks whose weak pointers expired: their queued tasks now sort first (depth
    INT_MAX).  The tasks of one GraphTask share its pointer, which this state owns
    (``copy`` clones them): expiring it is one assignment, whatever the queue's width."""
    for gid in e.gone:
        gt = s.graph_tasks.get(gid)
        if gt is None:
            raise _no_gt(e, gid)
        if not gt.completed:
            raise StateError(f"event {e.seq}: GraphTask {gid} is freed before it completed")
        if gt.freed:
            continue  # reported by two threads at once: once is enough
        s.graph_tasks[gid] = s.changes["graph_tasks"][gid] = gt._replace(freed=True)
        ref = s.refs.get(gid)
        if ref is not None:
            ref.alive = False


def _dependencies_computed(s: EngineState, e: Any) -> None:
    gid = e.graph_task
    if gid not in s.graph_tasks:
        raise _no_gt(e, gid)
    infos: list[NodeInfo] = e.nodes  # decoded (and type-checked) as NodeInfo tuples
    ids = list(map(_get_id, infos))
    fresh = dict(zip(ids, infos))
    _check_nodes(s, e, ids, fresh)
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
    if s.node_states[node][0] == "not_ready":  # all its inputs are in: on its way to a queue
        s.node_states[node] = _new(NodeState, ("ready", None, e.graph_task))


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
    if gt.completed:
        raise StateError(f"event {e.seq}: GraphTask {gt.id} completed twice")
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


def _thread_wait(s: EngineState, e: Any) -> None:
    t = _thread(s, e.thread)
    on = (e.on, e.target, e.holder)  # the views word it (words.wait_words)
    s.threads[e.thread] = _new(ThreadState, (t.name, "waiting", on, t.nodes))


def _thread_wake(s: EngineState, e: Any) -> None:
    t = _thread(s, e.thread)
    s.threads[e.thread] = _new(ThreadState, (t.name, "running", None, t.nodes))


def _deadlock(s: EngineState, e: Any) -> None:
    s.deadlock = e.data


def _node_meta(s: EngineState, e: Any) -> None:
    if e.node not in s.nodes:
        raise StateError(f"event {e.seq}: node_meta for node {e.node}, which no "
                         "dependencies_computed named")
    s.node_meta[e.node] = e.data


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
    "node_meta": _node_meta,
}
_HANDLERS.update({k: _nothing for k in SCHEMA if k not in _HANDLERS})  # hook, wakeup: no state
_BY_TYPE = {EVENT_TYPES[k]: h for k, h in _HANDLERS.items()}  # type(e): cheaper than e.kind
