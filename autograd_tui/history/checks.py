"""The fold's checks: what makes an event contradict the state, and its message.

Not in PyTorch.  A recording is untrusted data (docs/security.md): before the fold
applies an event it checks that the event could have come from the engine here.
Kept apart from ``fold.py`` so that the fold reads as what each event does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from autograd_tui.engine.events import Event, QueueTask
from autograd_tui.engine.ready_queue import INT_MAX
from autograd_tui.history.state import EngineState, GraphTaskState, NodeInfo, StateError


def _no_node(s: EngineState, e: Event) -> StateError:
    if e.node is None:
        return StateError(f"event {e.seq} ({e.kind}) names no node")
    return StateError(f"event {e.seq} ({e.kind}) names node {e.node}, which no "
                      "dependencies_computed event introduced")


def _no_gt(e: Event, gid: int | None) -> StateError:
    return StateError(f"event {e.seq} ({e.kind}) names GraphTask {gid}, which was never created")


#: the most inputs a node may state: its InputBuffer is made that long (PyTorch's
#: ``num_inputs`` is a uint32; no graph of ours comes near this)
MAX_NODE_INPUTS = 65_536


def _check_nodes(s: EngineState, e: Any, ids: list[int], fresh: dict[int, NodeInfo]) -> None:
    """The graph a GraphTask states: each node once, sizes in range, edges that go down
    in topological_nr (so no cycle), dependency counts of nodes that exist.  (An edge
    may lead out of the listed nodes: ``grad()`` and ``min_topo_nr`` prune what
    compute_dependencies visits.)"""
    if len(fresh) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise StateError(f"event {e.seq}: node {dup} is listed twice")
    for info in fresh.values():
        if not 0 <= info.num_inputs <= MAX_NODE_INPUTS:
            raise StateError(f"event {e.seq}: node {info.id} states {info.num_inputs} "
                             f"inputs (0..{MAX_NODE_INPUTS})")
        for target, _ in info.next:  # topological_nr falls along every edge: no cycle
            t = fresh.get(target) or s.nodes.get(target)  # type: ignore[arg-type]
            if t is not None and not t.topo < info.topo:
                raise StateError(f"event {e.seq}: the edge from node {info.id} to node "
                                 f"{target} does not go down in topological_nr "
                                 f"({info.topo} -> {t.topo}): a backward graph has no "
                                 "cycle")
    for node, count in e.dependencies:
        if node not in fresh and node not in s.nodes:
            raise StateError(f"event {e.seq}: dependencies name node {node}, which does "
                             "not exist")
        if count < 0:
            raise StateError(f"event {e.seq}: node {node} has {count} dependencies")


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


def _plus_expired(new: tuple[Any, ...], old: tuple[Any, ...], task: tuple[Any, ...],
                  graph_tasks: dict[int, GraphTaskState]) -> bool:
    """Is ``new`` ``old`` plus ``task``, where tasks of finished GraphTasks may have expired?

    A GraphTask that ended with an error leaves its other ready tasks in the queue, as
    PyTorch does; once the GraphTask is freed, ``NodeTask::getReentrantDepth`` reads its
    weak pointer as gone and the task sorts first with depth INT_MAX (``ready_queue.py``).
    Nothing emits an event when that happens (it is the owner dropping its reference),
    so the next push, which reports the queue, is where the fold sees it."""
    if len(new) != len(old) + 1:
        return False
    left = Counter(map(tuple, new))
    for t in old + (task,):
        t = tuple(t)
        if left[t]:
            left[t] -= 1
            continue
        gt = graph_tasks.get(t[0]) if t[0] is not None else None
        gone = (None, t[1], INT_MAX, t[3])
        if gt is None or not gt.completed or not left[gone]:
            return False
        left[gone] -= 1
    return True


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
