"""``NodeTask`` and ``ReadyQueue``.

Mirrors ``torch/csrc/autograd/engine.h`` / ``engine.cpp``: a NodeTask holds a
*weak* reference to its GraphTask, the node and its InputBuffer; a ReadyQueue
is a ``std::priority_queue`` ordered by ``CompareNodeTaskTime``: shutdown
tasks first, then dummy (wake-up) tasks, then higher reentrant depth, then
higher ``sequence_nr``.  A task whose GraphTask is gone counts as maximal
depth, so it is drained first.

Ties (several AccumulateGrads, all with the maximal sequence number) are
broken exactly as libstdc++'s ``push_heap``/``pop_heap`` break them.  CPython's
``heapq`` sifts as libstdc++ does (``__adjust_heap`` moves the hole down to a
leaf, taking the right child on a tie, then ``__push_heap`` moves the value
up), so with ``NodeTask.__lt__(a, b)`` defined as ``compare_node_task_time(b,
a)`` its min-heap pops what ``std::priority_queue``'s max-heap pops, with the
sift in C.  ``_push_heap_port``/``_pop_heap_port`` below, a line-by-line port
of libstdc++, are the reference (tests/engine/test_ready_queue.py pops random
sequences with heavy ties through both) and serve any other comparator.

The ReadyQueue itself keeps ``[key, task]`` entries (``task_key``): one int that
orders as ``CompareNodeTaskTime`` does (shutdown, then dummy, then depth, then
sequence number), so that ``heapq`` compares ints in C and calls no Python
comparator; on a tie of keys it compares the tasks (``NodeTask.__lt__``), which
is what makes ties "neither less" except between two shutdown tasks, as in C++.
Every pair of entries then compares as its pair of tasks does, so the heap is
the one ``heapq`` with ``NodeTask.__lt__`` builds, and pops in libstdc++'s order
(tests/engine/test_ready_queue.py checks it against the port on 3,000 random
sequences).  PyTorch reads a task's depth through its weak pointer at compare
time: a GraphTask that dies with tasks queued makes them maximal depth from then
on, without re-sorting the heap.  Here a dying GraphTask bumps ``_deaths`` (its
weak reference's callback) and the next push or pop of each queue first rewrites,
in place and without a sift, the keys of its tasks (``ReadyQueue._rekey``): the
same heap, the same pops.  (A GraphTask that dies during a sift, a data race in
C++, is seen at the next push or pop.)

Departure: ``depth_priority=False`` (an engine option, off by default) drops
the depth rule, to show the deadlock that rule prevents.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from heapq import heappop, heappush
from typing import TYPE_CHECKING, Any

from .input_buffer import InputBuffer
from .sync import Waitable, condition

if TYPE_CHECKING:
    from .graph import Node

# A task names its GraphTask without importing graph_task.py, which names this module's
# ReadyQueue: graph_task.h forward-declares ReadyQueue the same way.  ``base()`` gives
# the GraphTask (or None once it is gone).
GraphTask = Any

INT_MAX = 2**31 - 1

# task_key: an int key per task, smallest first (heapq is a min-heap).  A sequence
# number takes 64 bits; the depth (at most INT_MAX) goes above it.
_SHUTDOWN_KEY = -(1 << 100)  # below every other key: pops first
_DUMMY_KEY = -(1 << 99)  # below every ordinary task
_DEAD_DEPTH = INT_MAX << 64  # a task whose GraphTask is gone: maximal depth

#: GraphTasks that have died, counted by their weak references' callback
#: (``graph_task_died``); a ReadyQueue that sees it change re-reads its tasks' depths.
_deaths = [0]


def graph_task_died(_ref: Any) -> None:
    """The callback of every ``GraphTask.weak_self``.  (``+=`` on a list item is not
    atomic, but a lost bump still leaves a changed count, read after the death.)"""
    _deaths[0] += 1


class NodeTask:
    __slots__ = ("base", "fn", "inputs", "is_shutdown_task", "_seq")

    def __init__(self, graph_task: GraphTask | None, fn: Node | None, inputs: InputBuffer,
                 is_shutdown_task: bool = False) -> None:
        # One weak reference per GraphTask, shared by its tasks (see compare_node_task_time).
        self.base: Callable[[], GraphTask | None] = (
            graph_task.weak_self if graph_task is not None else _none
        )
        self.fn = fn
        self.inputs = inputs
        self.is_shutdown_task = is_shutdown_task
        # A node's sequence_nr is const (function.h), so a plain int copy of it is the
        # comparator's key for an ordinary task (None for a dummy or shutdown task).
        self._seq: int | None = (int(fn._sequence_nr) if fn is not None and not is_shutdown_task
                                 else None)

    def get_reentrant_depth(self) -> int:
        gt = self.base()
        return gt.reentrant_depth if gt is not None else INT_MAX

    def __lt__(self, other: NodeTask) -> bool:
        """``compare_node_task_time(other, self)``: ``heapq``'s min-heap then pops what
        libstdc++'s max-heap pops (``self`` pops before ``other``)."""
        s1 = other._seq
        s2 = self._seq
        # Two ordinary tasks of one GraphTask (the usual case): the comparator's last rule.
        if s1 is not None and s2 is not None and other.base is self.base:
            return s1 < s2
        return compare_node_task_time(other, self)


def _none() -> None:
    return None


_new_task = object.__new__


def task_key(task: NodeTask) -> int:
    """The int that orders ``task`` in a ReadyQueue (``CompareNodeTaskTime``, reversed:
    the smallest pops first).  Equal keys compare as neither less in C++, except two
    shutdown tasks: the heap then compares the tasks themselves (``NodeTask.__lt__``)."""
    if task.is_shutdown_task:
        return _SHUTDOWN_KEY
    seq = task._seq
    if seq is None:
        return _DUMMY_KEY
    return -((task.get_reentrant_depth() << 64) | seq)


def compare_node_task_time(t1: NodeTask, t2: NodeTask) -> bool:
    """``CompareNodeTaskTime``: True when t1 pops *after* t2."""
    if t2.is_shutdown_task:
        return True
    f1 = t1.fn
    if f1 is None or t1.is_shutdown_task:
        return False
    f2 = t2.fn
    if f2 is None:
        return True
    if t1.base is t2.base:  # the same GraphTask (the usual case): the same depth
        return f1._sequence_nr < f2._sequence_nr
    d1, d2 = t1.get_reentrant_depth(), t2.get_reentrant_depth()
    if d1 == d2:
        return f1._sequence_nr < f2._sequence_nr
    return d1 < d2


def compare_ignoring_depth(t1: NodeTask, t2: NodeTask) -> bool:
    """The ``depth_priority=False`` variant: sequence number only."""
    if t2.is_shutdown_task:
        return True
    if t1.fn is None or t1.is_shutdown_task:
        return False
    if t2.fn is None:
        return True
    return t1.fn._sequence_nr < t2.fn._sequence_nr


Compare = Callable[[NodeTask, NodeTask], bool]


def push_heap(heap: list[Any], value: Any, comp: Compare) -> None:
    """``std::push_heap`` after ``push_back``: ``heapq`` for the engine's ordering
    (``NodeTask.__lt__``), the libstdc++ port for any other ``comp``."""
    if comp is compare_node_task_time:
        heappush(heap, value)
    else:
        _push_heap_port(heap, value, comp)


def pop_heap(heap: list[Any], comp: Compare) -> Any:
    """``std::pop_heap`` then ``pop_back`` (the first task), as ``push_heap`` chooses."""
    if comp is compare_node_task_time:
        return heappop(heap)
    return _pop_heap_port(heap, comp)


def _push_heap_port(heap: list[Any], value: Any, comp: Compare) -> None:
    """libstdc++ ``__push_heap`` after ``push_back``."""
    heap.append(value)
    hole = len(heap) - 1
    parent = (hole - 1) // 2
    while hole > 0 and comp(heap[parent], value):
        heap[hole] = heap[parent]
        hole = parent
        parent = (hole - 1) // 2
    heap[hole] = value


def _pop_heap_port(heap: list[Any], comp: Compare) -> Any:
    """libstdc++ ``__pop_heap``/``__adjust_heap`` then ``pop_back``."""
    n = len(heap)
    top = heap[0]
    if n > 1:
        last = n - 1
        value = heap[last]
        heap[last] = top
        # __adjust_heap(first, 0, len=last, value)
        length = last
        hole = 0
        child = 0
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if comp(heap[child], heap[child - 1]):
                child -= 1
            heap[hole] = heap[child]
            hole = child
        if (length & 1) == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            heap[hole] = heap[child - 1]
            hole = child - 1
        # __push_heap(first, hole, top=0, value)
        parent = (hole - 1) // 2
        while hole > 0 and comp(heap[parent], value):
            heap[hole] = heap[parent]
            hole = parent
            parent = (hole - 1) // 2
        heap[hole] = value
    heap.pop()
    return top


def pop_order(heap: list[Any], comp: Compare) -> list[Any]:
    """The order in which ``heap`` will pop (a copy is drained; the heap is untouched)."""
    h = list(heap)
    return [pop_heap(h, comp) for _ in range(len(h))]


class ReadyQueue(Waitable):
    """A thread-safe priority queue of NodeTasks.

    ``ReadyQueue::pop`` blocks while the queue is empty; here the engine pops
    with ``try_pop`` and ``wait_not_empty`` so that it can report the wait as an
    event *outside* the queue's mutex (a paused thread must never hold it).
    With ``depth_priority`` (the default) the heap holds ``[task_key(task), task]``
    entries (see the module's docstring); without it, the tasks themselves, sifted by
    the libstdc++ port with ``compare_ignoring_depth``.
    """

    wait_kind = "queue"


    def __init__(self, name: str, device: str, depth_priority: bool = True,
                 engine: Any = None) -> None:
        self.name = name
        self.device = device
        self._heap: list[Any] = []
        self._mutex = threading.Lock()
        self._not_empty = condition(self._mutex)  # explore3: Condition(lock), 3 us less
        self._cond = self._not_empty
        self._waiters: list[int] = []
        self._compare: Compare = (compare_node_task_time if depth_priority
                                  else compare_ignoring_depth)
        self._keyed = depth_priority
        self._deaths = _deaths[0]  # the deaths this queue's keys have seen
        self._engine = engine

    def _rekey(self) -> None:
        """Under the mutex, some GraphTask having died: its ordinary tasks now have the
        maximal depth.  Keys change in place, the heap is not re-sorted, as in C++."""
        self._deaths = _deaths[0]
        for entry in self._heap:
            task = entry[1]
            seq = task._seq
            if seq is not None and task.base() is None:
                entry[0] = -(_DEAD_DEPTH | seq)

    def _push_locked(self, item: NodeTask) -> None:
        if self._keyed:
            if self._deaths != _deaths[0]:
                self._rekey()
            heappush(self._heap, [task_key(item), item])
        else:
            _push_heap_port(self._heap, item, self._compare)

    def _pop_locked(self) -> NodeTask:
        if self._keyed:
            if self._deaths != _deaths[0]:
                self._rekey()
            return heappop(self._heap)[1]  # type: ignore[no-any-return]
        return _pop_heap_port(self._heap, self._compare)

    def push(self, item: NodeTask, increment_outstanding_tasks: bool = True,
             on_push: Callable[[int], Any] | None = None) -> Any:
        """Push and wake one waiter.  ``on_push(size after the push)`` runs under the
        mutex just before the heap is sifted (the engine stamps the event there, so
        that events of one queue are numbered in the order its heap changed)."""
        with self._mutex:
            if increment_outstanding_tasks:
                gt = item.base()
                assert gt is not None
                gt.increment_outstanding()
            result = on_push(len(self._heap) + 1) if on_push is not None else None
            self._push_locked(item)
            if self._waiters:  # (notify_waiters checks too; this saves the call)
                self.notify_waiters(self._engine.waits if self._engine is not None else None)
        return result

    def push_node(self, graph_task: GraphTask, fn: Node, inputs: InputBuffer) -> None:
        """``push(NodeTask(graph_task, fn, inputs))`` for the engine when nobody observes:
        the live ``graph_task`` gives the depth, so the key needs no weak pointer."""
        # NodeTask(graph_task, fn, inputs), without its __init__ frame: the node's
        # sequence_nr is an int already (``_SequenceNr``), the key's low 64 bits.
        task = _new_task(NodeTask)
        task.base = graph_task.weak_self
        task.fn = fn
        task.inputs = inputs
        task.is_shutdown_task = False
        task._seq = seq = fn._sequence_nr
        # ``with lock:`` as acquire/try/finally/release: half the cost of the context manager's
        # __enter__/__exit__ lookups and calls, on a path taken once per node.
        mutex = self._mutex
        mutex.acquire()
        try:
            count_lock = graph_task._count_lock
            count_lock.acquire()  # increment_outstanding, inlined
            try:
                graph_task.outstanding_tasks += 1
            finally:
                count_lock.release()
            if self._keyed:
                if self._deaths != _deaths[0]:
                    self._rekey()
                heappush(self._heap, [-((graph_task.reentrant_depth << 64) | seq), task])
            else:
                _push_heap_port(self._heap, task, self._compare)
            if self._waiters:
                self.notify_waiters(self._engine.waits if self._engine is not None else None)
        finally:
            mutex.release()

    def try_pop(self, on_pop: Callable[[NodeTask, int, Any], Any] | None = None,
                before_pop: Callable[[], Any] | None = None) -> tuple[NodeTask | None, Any]:
        """Pop the first task if there is one (never blocks).  Under the mutex,
        ``before_pop()`` runs before the heap is sifted and ``on_pop(task, size,
        what before_pop returned)`` after."""
        with self._mutex:
            if not self._heap:
                return None, None
            before = before_pop() if before_pop is not None else None
            task = self._pop_locked()
            result = on_pop(task, len(self._heap), before) if on_pop is not None else None
            return task, result

    def try_pop_task(self) -> NodeTask | None:
        """``try_pop()``'s task, for the engine when nobody observes."""
        mutex = self._mutex
        mutex.acquire()  # (``with``, unrolled: see push_node)
        try:
            if not self._heap:
                return None
            if self._keyed:
                if self._deaths != _deaths[0]:
                    self._rekey()
                return heappop(self._heap)[1]  # type: ignore[no-any-return]
            return _pop_heap_port(self._heap, self._compare)
        finally:
            mutex.release()

    def pop(self) -> NodeTask:
        """``ReadyQueue::pop``: block until a task is ready (no events; for tools and tests)."""
        with self._mutex:
            while not self._heap:
                self._not_empty.wait()
            return self._pop_locked()

    def wait_not_empty(self) -> None:
        """Block until the queue has a task (the ``not_empty_`` condition variable)."""
        waits = self._engine.waits if self._engine is not None else None
        with self._mutex:
            waited = self.wait_for(lambda: bool(self._heap), waits)
        if waited and waits is not None:
            waits.after_wait("queue", self)  # outside the mutex: the controller may park us

    def empty(self) -> bool:
        with self._mutex:
            return not self._heap

    def __len__(self) -> int:
        return len(self._heap)

    def snapshot(self) -> list[NodeTask]:
        """The tasks in pop order."""
        with self._mutex:
            if not self._keyed:
                return pop_order(self._heap, self._compare)
            if self._deaths != _deaths[0]:
                self._rekey()
            heap = list(self._heap)  # the entries are shared, never changed by a pop
            return [heappop(heap)[1] for _ in range(len(heap))]

    def __repr__(self) -> str:
        return f"<ReadyQueue {self.name} ({len(self._heap)} tasks)>"
