"""The ReadyQueue's heap: ``heapq`` with ``NodeTask.__lt__`` pops as libstdc++ does.

``push_heap``/``pop_heap`` run the engine's ordering on ``heapq`` (the sift in C);
``_push_heap_port``/``_pop_heap_port`` are a line-by-line port of libstdc++'s
``__push_heap``/``__adjust_heap``, the reference.  Random push/pop sequences with
heavy ties (few sequence numbers, many AccumulateGrads, dummy and shutdown tasks,
several GraphTasks at several depths, some of them dying while their tasks wait)
must leave both heaps identical, element by element, after every step.
"""

from __future__ import annotations

import random

import pytest

from autograd_tui.engine.graph import UINT64_MAX, Node
from autograd_tui.engine.graph_task import GraphTask
from autograd_tui.engine.input_buffer import InputBuffer
from autograd_tui.engine.ready_queue import (
    NodeTask,
    ReadyQueue,
    _pop_heap_port,
    _push_heap_port,
    compare_ignoring_depth,
    compare_node_task_time,
    pop_heap,
    pop_order,
    push_heap,
)

SEQS = (0, 1, 2, 3, UINT64_MAX, UINT64_MAX, UINT64_MAX)  # heavy ties


def _graph_task(depth: int) -> GraphTask:
    return GraphTask(keep_graph=True, grad_mode=False, reentrant_depth=depth,
                     cpu_ready_queue=None)  # type: ignore[arg-type]


def _random_task(rng: random.Random, tasks_of: list[GraphTask | None]) -> NodeTask:
    r = rng.random()
    if r < 0.03:
        return NodeTask(None, None, InputBuffer(0), is_shutdown_task=True)
    gt = rng.choice(tasks_of)
    if r < 0.10:
        return NodeTask(gt, None, InputBuffer(0))  # a dummy (wake-up) task
    return NodeTask(gt, Node(sequence_nr=rng.choice(SEQS)), InputBuffer(0))


def _run(seed: int) -> int:
    """One random sequence through both heaps; the number of pops compared."""
    rng = random.Random(seed)
    tasks_of: list[GraphTask | None] = [_graph_task(rng.choice((0, 0, 1, 2)))
                                        for _ in range(rng.randint(1, 3))]
    fast: list[NodeTask] = []
    port: list[NodeTask] = []
    pops = 0
    for _ in range(rng.randint(1, 120)):
        r = rng.random()
        if r < 0.55 or not fast:
            task = _random_task(rng, tasks_of)
            push_heap(fast, task, compare_node_task_time)
            _push_heap_port(port, task, compare_node_task_time)
        elif r < 0.97:
            a = pop_heap(fast, compare_node_task_time)
            b = _pop_heap_port(port, compare_node_task_time)
            assert a is b
            pops += 1
        else:  # a GraphTask dies with tasks in the heap: they now count as maximal depth
            i = rng.randrange(len(tasks_of))
            dead = tasks_of[i].weak_self  # type: ignore[union-attr]
            tasks_of[i] = None
            assert dead() is None  # freed by its reference count, as in C++
            tasks_of = [t for t in tasks_of if t is not None] or [_graph_task(0)]
        assert [id(t) for t in fast] == [id(t) for t in port]
    assert [id(t) for t in pop_order(fast, compare_node_task_time)] == \
        [id(t) for t in port_order(port, compare_node_task_time)]
    return pops


def port_order(heap: list[NodeTask], comp: object) -> list[NodeTask]:
    h = list(heap)
    return [_pop_heap_port(h, comp) for _ in range(len(h))]  # type: ignore[arg-type]


@pytest.mark.parametrize("block", range(6))
def test_heapq_pops_as_libstdcxx(block: int) -> None:
    pops = sum(_run(500 * block + i) for i in range(500))  # 3,000 sequences in all
    assert pops > 10_000


def test_lt_is_the_comparator_reversed() -> None:
    rng = random.Random(7)
    gts: list[GraphTask | None] = [_graph_task(0), _graph_task(1)]
    tasks = [_random_task(rng, gts) for _ in range(60)]
    for a in tasks:
        for b in tasks:
            assert (a < b) is compare_node_task_time(b, a)


def test_other_comparators_use_the_port() -> None:
    rng = random.Random(3)
    gts: list[GraphTask | None] = [_graph_task(0), _graph_task(2)]
    heap: list[NodeTask] = []
    ref: list[NodeTask] = []
    for _ in range(200):
        task = _random_task(rng, gts)
        push_heap(heap, task, compare_ignoring_depth)
        _push_heap_port(ref, task, compare_ignoring_depth)
    assert heap == ref
    assert [pop_heap(heap, compare_ignoring_depth) for _ in range(len(heap))] == \
        [_pop_heap_port(ref, compare_ignoring_depth) for _ in range(len(ref))]


def test_ready_queue_uses_push_heap() -> None:
    rng = random.Random(11)
    gts: list[GraphTask | None] = [_graph_task(0)]
    for depth_priority, comp in ((True, compare_node_task_time),
                                 (False, compare_ignoring_depth)):
        q = ReadyQueue("cpu", "cpu", depth_priority)
        ref: list[NodeTask] = []
        for _ in range(50):
            task = _random_task(rng, gts)
            q.push(task, increment_outstanding_tasks=False)
            _push_heap_port(ref, task, comp)
        assert q.snapshot() == port_order(ref, comp)
        assert [q.try_pop()[0] for _ in range(50)] == port_order(ref, comp)


# --- the ReadyQueue's own heap: int keys, compared in C -------------------------------
def _run_queue(seed: int) -> int:
    """One random sequence through a ReadyQueue (``[task_key, task]`` entries) and the
    libstdc++ port with ``CompareNodeTaskTime`` (``std::priority_queue``): the same task
    at every pop, the same pop order at the end, GraphTasks dying meanwhile."""
    rng = random.Random(seed)
    tasks_of: list[GraphTask | None] = [_graph_task(rng.choice((0, 0, 1, 2, 5)))
                                        for _ in range(rng.randint(1, 3))]
    queue = ReadyQueue("cpu", "cpu")
    port: list[NodeTask] = []
    pops = 0
    for _ in range(rng.randint(1, 120)):
        r = rng.random()
        if r < 0.55 or not port:
            if r < 0.02:  # an ordinary task with no GraphTask: maximal depth from the start
                task = NodeTask(None, Node(sequence_nr=rng.choice(SEQS)), InputBuffer(0))
                queue.push(task, increment_outstanding_tasks=False)
            elif r < 0.30:  # the engine's path: the live GraphTask gives the depth
                gt = rng.choice(tasks_of)
                assert gt is not None
                queue.push_node(gt, Node(sequence_nr=rng.choice(SEQS)), InputBuffer(0))
                del gt  # (a GraphTask must be able to die)
                known = {id(t) for t in port}
                task = next(e[1] for e in queue._heap if id(e[1]) not in known)
            else:
                task = _random_task(rng, tasks_of)
                queue.push(task, increment_outstanding_tasks=False)
            _push_heap_port(port, task, compare_node_task_time)
        elif r < 0.95:
            a = queue.try_pop_task() if r < 0.75 else queue.try_pop()[0]
            b = _pop_heap_port(port, compare_node_task_time)
            assert a is b
            pops += 1
        else:  # a GraphTask dies with tasks queued: they now count as maximal depth
            i = rng.randrange(len(tasks_of))
            dead = tasks_of[i].weak_self  # type: ignore[union-attr]
            tasks_of[i] = None
            assert dead() is None
            tasks_of = [t for t in tasks_of if t is not None] or [_graph_task(0)]
        assert len(queue) == len(port)
    assert queue.snapshot() == port_order(port, compare_node_task_time)
    return pops


@pytest.mark.parametrize("block", range(6))
def test_ready_queue_pops_as_std_priority_queue(block: int) -> None:
    pops = sum(_run_queue(500 * block + i) for i in range(500))  # 3,000 sequences in all
    assert pops > 10_000


def test_keys_order_as_the_comparator() -> None:
    """Two tasks whose keys differ compare as the comparator says; equal keys only where
    the comparator says neither is less (or both are shutdown tasks)."""
    from autograd_tui.engine.ready_queue import task_key

    rng = random.Random(5)
    gts: list[GraphTask | None] = [_graph_task(0), _graph_task(1), _graph_task(3)]
    tasks = [_random_task(rng, gts) for _ in range(80)]
    tasks.append(NodeTask(None, Node(sequence_nr=2), InputBuffer(0)))
    for a in tasks:
        for b in tasks:
            ka, kb = task_key(a), task_key(b)
            if ka != kb:
                assert (ka < kb) is compare_node_task_time(b, a)
            elif not (a.is_shutdown_task and b.is_shutdown_task):
                assert not compare_node_task_time(a, b) and not compare_node_task_time(b, a)
