"""``Engine``: runs a backward pass on real threads, as PyTorch's engine does.

Mirrors ``torch/csrc/autograd/engine.cpp``, function by function:

================================  =============================================
ours                              engine.cpp
================================  =============================================
``Engine.execute``                ``Engine::execute``
``execute_with_graph_task``       ``Engine::execute_with_graph_task``
``thread_main``                   ``Engine::thread_main``
``evaluate_function``             ``Engine::evaluate_function``
``call_function``                 ``call_function`` (static)
``compute_dependencies``          ``Engine::compute_dependencies``
``compute_min_topological_nr``    ``compute_min_topological_nr``
``validate_outputs``              ``validate_outputs``
``thread_init``                   ``Engine::thread_init`` (device threads)
``reentrant_thread_init``         ``Engine::reentrant_thread_init``
``add_thread_pool_task``          ``Engine::add_thread_pool_task``
``ready_queue``                   ``Engine::ready_queue``
``ready_queue_by_index``          ``Engine::ready_queue_by_index``
``thread_on_exception``           ``Engine::thread_on_exception``
``queue_callback``                ``Engine::queue_callback``
================================  =============================================

Thread-locals (``worker_device``, ``current_depth``, ``total_depth``,
``local_ready_queue``) live in ``Engine._tls``.  The thread that calls
backward runs the CPU work itself on its own ReadyQueue, reused across calls;
each ``cuda:N`` device has one long-lived worker thread and queue, started on
first use (PyTorch starts them all at the first backward; starting lazily
keeps a CPU-only run free of idle threads in the app's thread pane).  What a
hook may return is checked as ``python_hook.cpp`` checks it (``python_hook.py``).

Errors: every Python exception a node, hook or final callback raises, a
``KeyboardInterrupt`` or ``SystemExit`` included, is what PyTorch's
``python_error`` (a ``std::exception``) is: ``thread_main`` hands it to
``thread_on_exception``, the GraphTask fails (its remaining tasks are popped and
skipped) and ``execute`` re-raises the same object in the caller.

Departures, all deliberate:
- ``ThreadAborted`` (``sync.py``), the controller's teardown signal, is not a
  node error: it passes through ``thread_main`` and ends the thread.
- The caller's wait is interruptible (in PyTorch it is in C++, and Ctrl-C waits
  for the backward to end): a ``KeyboardInterrupt`` that stops ``execute``
  while it waits fails the GraphTask (``thread_on_exception`` with no node)
  before it is re-raised, so device threads drop the abandoned GraphTask's tasks.
- Nested ``thread_main`` calls are Python frames, not C++ ones: a nested call
  close to the interpreter's recursion limit raises it while it runs, and the
  last one out restores it (``_RecursionHeadroom``).
- No CUDA streams, events or stream guards (``leaf_streams``,
  ``stash_current_streams``): the scheduler's behaviour does not depend on them.
- No compiled autograd, no ``multithreading_enabled`` switch, no
  ``checkpoint_valid`` guard, no ThreadLocalState propagation except grad mode.
- Every step a student should see is reported to observers as an ``Event``
  (``events.py``); with no observer the cost is one truth test per site.
- The hot path inlines, with a comment naming each, what engine.cpp inlines or
  what is a one-line call there: ``call_function`` for a node without hooks,
  ``InputBuffer``'s constructor and ``num_inputs`` in ``evaluate_function``;
  ``GraphTask::completed``, the outstanding-task decrement and the guards
  (``AutoGradMode``, ``GraphTaskGuard``, ``NodeGuard``) in ``thread_main``; with no
  observer, tasks go through ``ReadyQueue.push_node``/``try_pop_task`` (the same
  heap, one call each).  ``evaluate_function`` also inlines ``validate_outputs``'
  common case (as many gradients as edges, each equal in shape, dtype and device to
  its ``InputMetadata``: one tuple comparison; anything else is ``validate_outputs``'
  own work, which checks them all again) and, with no observer and no grad mode,
  ``InputBuffer::add``'s out-of-place sum of two of our tensors.
  ``compute_dependencies`` keeps its ``seen`` set as the keys of ``dependencies``
  (one lookup per edge) and fills ``nodes_in_graph`` from them.  On the per-node
  path the locks engine.cpp takes with ``std::lock_guard`` are taken with
  ``acquire``/``try``/``finally``/``release`` (a ``with`` block's ``__enter__`` and
  ``__exit__`` cost twice as much), and edges are walked with a counter and read by
  index (``zip()`` and unpacking an ``Edge``, a tuple subclass, cost more than the work).
- Options that re-create historical designs, each off by default, for the
  controller's deadlock lessons: ``reentrant="block"`` (a reentrant backward on
  a worker thread just waits on its future, as before PyTorch's reentrant
  engine), ``wake_owner=False`` (no dummy task to the owner),
  ``depth_priority=False`` (ReadyQueue ignores reentrant depth),
  ``reentrant_pool_size=K`` (at most K pool threads).
"""

from __future__ import annotations

import itertools
import operator
import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .device import set_device
from .errstate import ignore_errors
from .events import (
    EVENT_TYPES,
    NULL,
    OPTIONAL,
    Event,
    NodeInfo,
    Observer,
    make_event,
    raw_list,
    summary_raw,
)
from .grad_mode import _anomaly
from .grad_mode import _tls as grad_tls
from .graph import AccumulateGrad, Edge, GraphRoot, Node
from .graph_task import (
    CPU_DEVICE,
    NO_DEVICE,
    GraphTask,
    get_current_graph_task,
)
from .graph_task import _current as current_tls
from .input_buffer import InputBuffer
from .python_hook import check_result, check_single_result
from .ready_queue import INT_MAX, NodeTask, ReadyQueue
from .sync import (
    CarriedThread,
    ThreadAborted,
    Waitable,
    condition,
    set_tracker_lookup,
    start_thread,
)
from .tensor import Tensor, _tensor_of

_new_buffer = object.__new__  # an InputBuffer without its __init__ frame (the hot path)

#: MAX_DEPTH in engine.h: nested thread_main calls on one thread before a hand-off
MAX_DEPTH = 60

_generations = itertools.count(1)

# The kinds emitted once or more per node, built field by field in SCHEMA order
# (``Engine._send``, the push and pop stamps): make_event's generic dict walk costs as
# much as the event.
_PUSH, _POP = EVENT_TYPES["push"], EVENT_TYPES["pop"]
_NODE_START, _NODE_END = EVENT_TYPES["node_start"], EVENT_TYPES["node_end"]
_DEP_DEC, _BUF_ACC = EVENT_TYPES["dependency_decrement"], EVENT_TYPES["buffer_accumulate"]
_OUT_DEC, _SKIPPED = EVENT_TYPES["outstanding_decrement"], EVENT_TYPES["node_skipped"]
_NR_INSERT, _NR_REMOVE = EVENT_TYPES["not_ready_insert"], EVENT_TYPES["not_ready_remove"]
_NODE_META, _DEPS = EVENT_TYPES["node_meta"], EVENT_TYPES["dependencies_computed"]
_GT_CREATED, _THREAD_START = EVENT_TYPES["graph_task_created"], EVENT_TYPES["thread_start"]
_WAIT, _WAKE = EVENT_TYPES["thread_wait"], EVENT_TYPES["thread_wake"]
_COMPLETION, _WAKEUP = EVENT_TYPES["completion"], EVENT_TYPES["wakeup"]
_THREAD_EXIT = EVENT_TYPES["thread_exit"]
#: a ``node_meta`` dict's values in SCHEMA order (KeyError if one is absent)
_meta_fields = operator.itemgetter(*[k for k, _, _ in _NODE_META.FIELDS])
#: the ``gone`` of every push and pop that reports none: one list, read only, not one
#: more object per event for the cyclic collector to scan in a History
_NO_GONE: list[int] = []


class _RecursionHeadroom:
    """Room on the Python stack for one more nested ``thread_main`` (not in PyTorch).

    PyTorch's nested ``thread_main`` calls are C++ frames; ours are Python frames
    (about 10 per level), which count against the interpreter's recursion limit.
    A nested call made close to the limit raises it, process-wide, for as long as
    the call runs; when the last such call returns, the limit goes back to what
    it was (unless someone else changed it meanwhile).  With the default limit
    (1000), ``MAX_DEPTH`` levels called from a stack under about 150 frames deep
    never need it; a deeper caller or a bigger ``max_recursion_depth`` does.
    """

    #: frames a node (user code, hooks, the controller's gates) may use below the next level
    ROOM = 200
    _lock = threading.Lock()
    _active = 0  # nested calls running, on every thread
    _saved: int | None = None  # the limit before we raised it
    _ours: int | None = None  # the limit we set

    @classmethod
    def enter(cls) -> None:
        depth, frame = 0, sys._getframe()
        while frame is not None:
            depth, frame = depth + 1, frame.f_back
        need = depth + cls.ROOM
        with cls._lock:
            cls._active += 1
            limit = sys.getrecursionlimit()
            if need > limit:
                if cls._saved is None:
                    cls._saved = limit
                cls._ours = need + cls.ROOM  # room for a few more levels before the next raise
                sys.setrecursionlimit(cls._ours)

    @classmethod
    def exit(cls) -> None:
        with cls._lock:
            cls._active -= 1
            if cls._active or cls._saved is None:
                return
            if sys.getrecursionlimit() == cls._ours:
                sys.setrecursionlimit(cls._saved)
            cls._saved = cls._ours = None


class ThreadPoolShared(Waitable):
    """``ThreadPoolShared``: GraphTasks waiting for a reentrant pool thread."""

    wait_kind = "pool"
    name = "reentrant pool"

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.work = condition(self.mutex)
        self._cond = self.work
        self._waiters: list[int] = []
        self.num_workers = 0
        self.graphtasks_queue: deque[Callable[[], GraphTask | None]] = deque()
        self.num_threads = 0


class EngineClosed(RuntimeError):
    pass


class Engine:
    def __init__(
        self,
        *,
        max_recursion_depth: int = MAX_DEPTH,
        reentrant: str = "nested",
        wake_owner: bool = True,
        depth_priority: bool = True,
        reentrant_pool_size: int | None = None,
    ) -> None:
        if reentrant not in ("nested", "block"):
            raise ValueError(f"reentrant must be 'nested' or 'block', not {reentrant!r}")
        if max_recursion_depth < 0:
            raise ValueError("max_recursion_depth must be >= 0")
        if reentrant_pool_size is not None and reentrant_pool_size < 0:
            raise ValueError("reentrant_pool_size must be >= 0 or None")
        self.max_recursion_depth = max_recursion_depth
        self.reentrant = reentrant
        self.wake_owner = wake_owner
        self.depth_priority = depth_priority
        self.reentrant_pool_size = reentrant_pool_size

        self._tls = threading.local()
        self._generation = next(_generations)
        self._node_ids = itertools.count(1)
        self._graph_task_ids = itertools.count(1)
        self._seq = itertools.count(1)  # event k has seq k (docs/architecture.md)
        self._observers: tuple[Observer, ...] = ()
        self.waits: Any = None  # wait tracker installed by the controller
        self.record_values = False  # events carry whole tensors, not just summaries
        # How an event summarizes a tensor (raw JSON); the explorer's lean runs, which read
        # no summary, swap in a null one (autograd_tui/control/fastrun.py).
        self.summary_of = summary_raw
        self._lock = threading.Lock()
        self.device_ready_queues: dict[int, ReadyQueue] = {}
        self.cpu_ready_queues: dict[str, ReadyQueue] = {}  # one per thread that called backward
        self.thread_pool_shared = ThreadPoolShared()
        self._threads: list[threading.Thread] = []
        self._owner_names = itertools.count(1)
        self._closed = False
        # GraphTask id -> weak pointer, for those that completed with tasks left (see _gone)
        self._leftover: dict[int, Callable[[], GraphTask | None]] = {}

    # --- options, for display and recordings --------------------------------------
    def options(self) -> dict[str, Any]:
        return {"max_recursion_depth": self.max_recursion_depth, "reentrant": self.reentrant,
                "wake_owner": self.wake_owner, "depth_priority": self.depth_priority,
                "reentrant_pool_size": self.reentrant_pool_size}

    # --- observers and events -----------------------------------------------------------
    def add_observer(self, observer: Observer) -> None:
        with self._lock:
            self._observers = self._observers + (observer,)

    def remove_observer(self, observer: Observer) -> None:
        with self._lock:
            self._observers = tuple([o for o in self._observers if o is not observer])

    def make_lock(self, name: str) -> Any:
        """A lock for engine state; the controller may install instrumented ones."""
        waits = self.waits
        return waits.make_lock(name) if waits is not None else threading.Lock()

    def _nid(self, node: Node) -> int:
        """``node_id`` of a node that most likely has one in this generation already."""
        eid = node._eid
        return eid[1] if eid is not None and eid[0] == self._generation else \
            self.node_id(node)

    def node_id(self, node: Node) -> int:
        eid = node._eid
        if eid is None or eid[0] != self._generation:
            with self._lock:
                eid = node._eid
                if eid is None or eid[0] != self._generation:
                    eid = (self._generation, next(self._node_ids))
                    node._eid = eid
        return eid[1]

    def thread_name(self) -> str:
        name = getattr(self._tls, "name", None)
        if name is None:
            n = next(self._owner_names)
            name = "cpu (owner)" if n == 1 else f"cpu (owner {n})"
            self._tls.name = name
        return name

    def set_thread_name(self, name: str) -> None:
        """Name the calling thread in this engine's events (the controller's program thread)."""
        self._tls.name = name

    def next_seq(self) -> int:
        """The number of the next event: every event of a run is numbered from this one
        counter, so an event made outside the engine (the controller's ``deadlock``) takes
        its number here and event k still has seq k (docs/architecture.md)."""
        return next(self._seq)

    def emit(self, kind: str, **data: Any) -> None:
        """Emit an event of the calling thread that names no GraphTask, node or queue: what
        a wait tracker reports for the engine (``thread_wait`` on a user lock or signal)."""
        self._emit(kind, None, None, None, **data)

    def _make_event(self, kind: str, gt: GraphTask | None, node: Node | None,
                    queue: Any, data: dict[str, Any]) -> Event:
        qname = queue.name if isinstance(queue, ReadyQueue) else queue
        return make_event(next(self._seq), kind, self.thread_name(),
                     gt.id if gt is not None else None,
                     self.node_id(node) if node is not None else None, qname, data)

    def _send(self, cls: type[Event], gt: GraphTask | None, node: Node | None,
              queue: str | None, *fields: Any) -> None:
        """The event of kind ``cls`` with ``fields`` in SCHEMA order, each as the event
        keeps it (summaries raw), delivered to every observer: ``_make_event`` for the
        kinds of the hot path (make_event's generic dict walk costs as much as the event)."""
        nid = None
        if node is not None:
            eid = node._eid
            nid = eid[1] if eid is not None and eid[0] == self._generation else \
                self.node_id(node)
        event = cls(next(self._seq),  # type: ignore[call-arg]
                    getattr(self._tls, "name", None) or self.thread_name(),
                    gt.id if gt is not None else None, nid, queue, *fields)
        for obs in self._observers:
            obs(event)

    def _summarize(self, t: Any) -> Any:
        """A tensor's summary as the event keeps it (raw JSON; made once per tensor)."""
        return self.summary_of(t, self.record_values) if t is not None else NULL

    def _summaries(self, ts: Sequence[Any]) -> Any:
        full, of = self.record_values, self.summary_of
        return raw_list([of(t, full) if t is not None else NULL for t in ts])

    def _deliver(self, event: Event) -> None:
        for obs in self._observers:
            obs(event)

    def _emit(self, kind: str, gt: GraphTask | None, node: Node | None, queue: Any,
              **data: Any) -> None:
        self._deliver(self._make_event(kind, gt, node, queue, data))

    # --- queues -------------------------------------------------------------------------
    def _new_queue(self, name: str, device: str) -> ReadyQueue:
        return ReadyQueue(name, device, self.depth_priority, engine=self)

    def init_local_ready_queue(self, ready_queue: ReadyQueue | None = None) -> None:
        tls = self._tls
        if not hasattr(tls, "worker_device"):
            tls.worker_device = NO_DEVICE
            tls.current_depth = 0
            tls.total_depth = 0
        if ready_queue is not None:
            tls.local_ready_queue = ready_queue
        elif getattr(tls, "local_ready_queue", None) is None:
            name = self.thread_name()
            qname = "cpu" if name == "cpu (owner)" else f"cpu[{name}]"
            tls.local_ready_queue = self._new_queue(qname, "cpu")
            with self._lock:
                self.cpu_ready_queues[qname] = tls.local_ready_queue

    def ready_queue(self, cpu_ready_queue: ReadyQueue, device: str) -> ReadyQueue:
        """The queue for ``device``: the GraphTask's CPU queue, or the device's queue."""
        if device == "cpu":
            return cpu_ready_queue
        return self._device_queue(int(device[5:]))

    def ready_queue_by_index(self, cpu_ready_queue: ReadyQueue, device_index: int) -> ReadyQueue:
        if device_index == CPU_DEVICE:
            return cpu_ready_queue
        return self._device_queue(device_index)

    def _device_queue(self, index: int) -> ReadyQueue:
        q = self.device_ready_queues.get(index)
        if q is None:
            created = False
            with self._lock:
                if self._closed:
                    raise EngineClosed("the engine has been shut down")
                q = self.device_ready_queues.get(index)
                if q is None:
                    q = self._new_queue(f"cuda:{index}", f"cuda:{index}")
                    self.device_ready_queues[index] = q
                    created = True
            if created:
                self._start_thread(f"cuda:{index}", self.thread_init, index, q)
        return q

    def _push(self, queue: ReadyQueue, task: NodeTask, increment: bool = True) -> None:
        if not self._observers:
            queue.push(task, increment)
            return
        gt = task.base()
        fn = task.fn

        def stamp(size: int) -> Event:  # under the queue's mutex, before the sift
            gone = self._gone() if self._leftover else _NO_GONE
            shutdown = task.is_shutdown_task
            return _PUSH(next(self._seq),  # the event, built here: one frame less a push
                         getattr(self._tls, "name", None) or self.thread_name(),
                         gt.id if gt is not None else None,
                         None if fn is None else self._nid(fn), queue.name,
                         # task.get_reentrant_depth(), inlined: gt, held here, is its base
                         gt.reentrant_depth if gt is not None else INT_MAX,
                         int(fn._sequence_nr) if fn is not None else None,
                         fn is None and not shutdown, shutdown, size,
                         gt.outstanding_tasks if gt is not None else 0, gone)

        event = queue.push(task, increment, on_push=stamp)
        for obs in self._observers:  # _deliver, inlined
            obs(event)

    def _gone(self) -> list[int]:
        """Not in PyTorch: the GraphTasks with tasks left in a queue (those that failed)
        whose weak pointers have expired since the last push or pop reported.  From then
        on their tasks sort first (``get_reentrant_depth`` reads INT_MAX), and the events
        say so, so that a History's heaps sort exactly as the queues do."""
        gone = [gid for gid, ref in list(self._leftover.items()) if ref() is None]
        for gid in gone:
            self._leftover.pop(gid, None)
        return gone

    def _before_pop(self) -> list[int]:
        return self._gone() if self._leftover else _NO_GONE

    def _pop(self, queue: ReadyQueue) -> NodeTask:
        """``local_ready_queue->pop()``, reporting a wait when the queue is empty."""
        observing = bool(self._observers)
        while True:
            if observing:
                def stamp(task: NodeTask, size: int, gone: Any) -> Event:
                    gt = task.base()
                    shutdown = task.is_shutdown_task
                    fn = task.fn
                    return _POP(next(self._seq),  # the event, built here: one frame less a pop
                                getattr(self._tls, "name", None) or self.thread_name(),
                                gt.id if gt is not None else None,
                                None if fn is None else self._nid(fn), queue.name,
                                fn is None and not shutdown, shutdown, size,
                                gt is None and not shutdown, gone)

                task, event = queue.try_pop(stamp, self._before_pop)
            else:
                task, event = queue.try_pop()
            if task is not None:
                if event is not None:
                    for obs in self._observers:  # _deliver, inlined
                        obs(event)
                return task
            if observing:  # (``_send``: no generic dict walk, as for the kinds above)
                self._send(_WAIT, None, None, queue.name, "queue", queue.name, None)
            queue.wait_not_empty()
            if observing:
                self._send(_WAKE, None, None, queue.name, "queue", queue.name)

    # --- Engine::execute ------------------------------------------------------------------
    def execute(
        self,
        roots: Sequence[Edge],
        inputs: Sequence[Tensor | None],
        keep_graph: bool,
        create_graph: bool,
        accumulate_grad: bool,
        outputs: Sequence[Edge] = (),
    ) -> list[Tensor | None]:
        if self._closed:
            raise EngineClosed("the engine has been shut down; create a new Engine")
        inputs = list(inputs)
        validate_outputs(roots, inputs)
        if not accumulate_grad and not outputs:
            raise ValueError("grad requires non-empty inputs.")

        self.init_local_ready_queue()
        tls = self._tls
        not_reentrant_backward_call = getattr(tls, "worker_device", NO_DEVICE) == NO_DEVICE
        graph_task = GraphTask(
            keep_graph=keep_graph,
            grad_mode=create_graph,
            reentrant_depth=0 if not_reentrant_backward_call else tls.total_depth + 1,
            cpu_ready_queue=tls.local_ready_queue,
            graph_roots=[e.function for e in roots if e.function is not None],
            engine=self,
            id=next(self._graph_task_ids),
        )
        # A single root needs no GraphRoot: its node is queued directly.
        skip_dummy_node = len(roots) == 1
        graph_root: Node = roots[0].function if skip_dummy_node else GraphRoot(roots, inputs)  # type: ignore[assignment]
        if self._observers:  # its fields in SCHEMA order (``_send``: no generic dict walk)
            root_ids = [self.node_id(e.function) for e in roots if e.function]
            self._send(_GT_CREATED, graph_task, None, None, graph_task.reentrant_depth,
                       keep_graph, create_graph, accumulate_grad, root_ids,
                       self.node_id(graph_root), self.depth_priority)

        min_topo_nr = compute_min_topological_nr(outputs)
        self.compute_dependencies(graph_root, graph_task, min_topo_nr)
        if outputs:
            graph_task.init_to_execute(graph_root, list(outputs), accumulate_grad, min_topo_nr)
            if self._observers:
                self._emit_exec_info(graph_task)

        if skip_dummy_node:
            input_buffer = InputBuffer(roots[0].function.num_inputs())  # type: ignore[union-attr]
            input_buffer.add(roots[0].input_nr, inputs[0])
        else:
            input_buffer = InputBuffer(0)
        fut = graph_task.future_result
        try:
            self.execute_with_graph_task(graph_task, graph_root, input_buffer)
            if not fut.completed() and self._observers:
                # A pool hand-off (or reentrant="block"): this thread now sleeps on the future.
                self._emit("thread_wait", graph_task, None, None, on="future",
                           target=f"GraphTask {graph_task.id}", holder=None)
                fut.wait()
                self._emit("thread_wake", graph_task, None, None, on="future",
                           target=f"GraphTask {graph_task.id}")
            fut.wait()
        except ThreadAborted:
            raise  # the controller tears every thread down: nothing to hand over
        except BaseException as e:
            # Not in PyTorch, whose wait is in C++: Ctrl-C (or an engine error) while this
            # thread waits for the GraphTask.  Fail it, so that the threads still holding
            # its tasks skip them (the has_error check in thread_main), then re-raise.
            if not graph_task.future_completed:
                self.thread_on_exception(graph_task, None, e)
            fut.take_error()
            raise
        err = fut.take_error()
        if err is not None:
            # Re-raise without keeping it in the future: the exception's traceback holds
            # thread_main's frame, which holds the GraphTask, which holds the future.
            # Taking it out breaks that cycle, so the GraphTask dies with this call, as
            # in PyTorch (its leftover tasks then pop as expired, deterministically).
            raise err
        return fut.value()

    def _emit_exec_info(self, gt: GraphTask) -> None:
        needed = sorted(self.node_id(n) for n, i in gt.exec_info.items() if i.needed)
        captures = sorted([self.node_id(n), c.input_idx, c.output_idx]
                          for n, i in gt.exec_info.items() for c in (i.captures or []))
        self._emit("exec_info", gt, None, None, needed=needed, captures=captures)

    def compute_dependencies(self, root: Node, task: GraphTask, min_topo_nr: int) -> None:
        """Count, for every node reachable from ``root``, the edges that lead into it."""
        queue = [root]
        dependencies = task.dependencies
        nodes_in_graph = task.nodes_in_graph
        observing = bool(self._observers)
        if observing:
            self.node_id(root)  # ids in discovery order: deterministic for a given graph
        get = dependencies.get
        while queue:
            fn = queue.pop()
            if fn._topological_nr < min_topo_nr:
                continue  # cannot reach any output of grad(): prune
            for edge in fn._next_edges:
                # Edge.function, by index: unpacking an Edge (a tuple subclass) goes
                # through an iterator
                next_ptr = edge[0]
                if next_ptr is not None:
                    # The nodes seen are the keys of dependencies: a node is new when it
                    # has no count yet (one dict lookup instead of the set's and the map's).
                    count = get(next_ptr)
                    if count is None:
                        dependencies[next_ptr] = 1
                        queue.append(next_ptr)
                        if observing:
                            self.node_id(next_ptr)
                    else:
                        dependencies[next_ptr] = count + 1
        nodes_in_graph.update(dependencies)  # the seen set: every node with a count
        if observing:
            self._emit_dependencies(root, task, min_topo_nr)

    def _emit_dependencies(self, root: Node, task: GraphTask, min_topo_nr: int) -> None:
        gen, node_id = self._generation, self.node_id

        def nid(n: Node) -> int:  # node_id, inlined: compute_dependencies gave every one
            eid = n._eid
            return eid[1] if eid is not None and eid[0] == gen else node_id(n)

        pairs = sorted([(nid(n), n) for n in task.nodes_in_graph if n is not root])  # ids unique
        ids = {n: i for i, n in pairs}  # each node's id once, looked up below
        ids[root] = nid(root)
        new, acc, plain_meta = tuple.__new__, AccumulateGrad, Node.node_meta
        nodes = []
        metas = []
        for n in (root, *[n for _, n in pairs]):  # NodeInfo tuples, as the event keeps them
            nodes.append(new(NodeInfo, (  # NodeInfo(...) without its Python-level __new__
                ids[n], n.name(), n.device(), int(n._sequence_nr), n._topological_nr,
                len(n._input_metadata),  # num_inputs()
                tuple([((ids[f] if f in ids else nid(f)) if f is not None else None, i)
                       for f, i in n._next_edges]),
                isinstance(n, acc))))
            if type(n).node_meta is not plain_meta:  # only a PyTorch graph's nodes say more
                metas.append(n)
        deps = sorted([[ids[n] if n in ids else nid(n), c] for n, c in task.dependencies.items()])
        self._send(_DEPS, task, root, None, deps, nodes, min_topo_nr)
        for n in metas:  # a PyTorch graph's module, creation site, saved tensors
            meta = n.node_meta()
            if meta is not None:  # one per node: its fields straight from the dict
                try:
                    fields = _meta_fields(meta)  # every field there: one C call
                except KeyError:  # an optional one left out: its default
                    fields = [meta[k] if k in meta else OPTIONAL["node_meta", k]
                              for k, _, _ in _NODE_META.FIELDS]
                self._send(_NODE_META, task, n, None, *fields)

    # --- Engine::execute_with_graph_task -------------------------------------------------
    def execute_with_graph_task(self, graph_task: GraphTask, graph_root: Node,
                                input_buffer: InputBuffer) -> Any:
        tls = self._tls
        worker_device = getattr(tls, "worker_device", NO_DEVICE)
        graph_task.mutex.acquire()
        queue = self.ready_queue(graph_task.cpu_ready_queue, input_buffer.device())
        if worker_device == NO_DEVICE:
            # A CPU thread drives a new (non-reentrant) backward on its own queue.
            tls.worker_device = CPU_DEVICE
            graph_task.owner = CPU_DEVICE
            self._push(queue, NodeTask(graph_task, graph_root, input_buffer))
            graph_task.mutex.release()
            try:
                self.thread_main(graph_task)
            finally:
                tls.worker_device = NO_DEVICE
            return graph_task.future_result

        # A reentrant backward, called from inside a node on this worker thread.
        graph_task.owner = worker_device
        self._push(queue, NodeTask(graph_task, graph_root, input_buffer))
        current_depth = getattr(tls, "current_depth", 0)
        parent = get_current_graph_task()
        if self.reentrant == "block":
            graph_task.mutex.release()
            if self._observers:
                self._emit("reentrant_handoff", graph_task, graph_root, queue, mode="block",
                           depth=graph_task.reentrant_depth, current_depth=current_depth,
                           parent_graph_task=parent.id if parent else None)
            return graph_task.future_result  # execute() now blocks on the future
        if current_depth >= self.max_recursion_depth:
            # Too deep on this thread: hand the GraphTask to a pool thread.
            if self._observers:
                self._emit("reentrant_handoff", graph_task, graph_root, queue, mode="pool",
                           depth=graph_task.reentrant_depth, current_depth=current_depth,
                           parent_graph_task=parent.id if parent else None)
            self.add_thread_pool_task(graph_task)
            graph_task.mutex.release()
        else:
            if self._observers:
                self._emit("reentrant_handoff", graph_task, graph_root, queue, mode="nested",
                           depth=graph_task.reentrant_depth, current_depth=current_depth,
                           parent_graph_task=parent.id if parent else None)
            tls.total_depth = getattr(tls, "total_depth", 0) + 1
            tls.current_depth = current_depth + 1
            graph_task.mutex.release()
            _RecursionHeadroom.enter()
            try:
                self.thread_main(graph_task)
            finally:
                _RecursionHeadroom.exit()
                tls.current_depth -= 1
                tls.total_depth -= 1
        return graph_task.future_result

    # --- Engine::thread_main ---------------------------------------------------------------
    def thread_main(self, graph_task: GraphTask | None) -> None:
        """Pop and run tasks until ``graph_task`` completes (forever if it is None)."""
        # torch computes with inf and NaN silently: so do the nodes (NumPy would warn)
        with ignore_errors():
            tls = self._tls
            local_ready_queue: ReadyQueue = tls.local_ready_queue
            # The thread-locals the guards below save and restore, through this thread's
            # own dicts of them (what is_grad_enabled() and get_current_graph_task() read),
            # with their defaults: a dict item costs less than a threading.local attribute.
            grad_state = grad_tls.__dict__
            current = current_tls.__dict__
            grad_state.setdefault("enabled", True)
            current.setdefault("task", None)
            current.setdefault("node", None)
            # future_result.completed(), inlined (a plain read, as the C++ atomic's)
            while graph_task is None or not graph_task.future_result._completed:
                if self._observers:
                    task = self._pop(local_ready_queue)
                else:  # _pop's first try, inlined: the queue is rarely empty
                    task = local_ready_queue.try_pop_task()
                    if task is None:
                        task = self._pop(local_ready_queue)
                if task.is_shutdown_task:
                    break
                local_graph_task = task.base()
                if local_graph_task is None:
                    continue  # its GraphTask is gone: nothing to do
                fn = task.fn
                if fn is not None and not local_graph_task.has_error:
                    # AutoGradMode(graph_task.grad_mode), GraphTaskGuard and NodeGuard, inlined:
                    # this runs once per node, and context managers cost as much as the heap.
                    prev_mode = grad_state["enabled"]
                    prev_task = current["task"]
                    prev_node = current["node"]  # NodeGuard
                    grad_state["enabled"] = local_graph_task.grad_mode
                    current["task"] = local_graph_task
                    current["node"] = fn
                    try:
                        self.evaluate_function(local_graph_task, fn, task.inputs,
                                               local_graph_task.cpu_ready_queue)
                    except ThreadAborted:
                        raise  # the controller's teardown, not an error of the node
                    except BaseException as e:  # noqa: BLE001 - reported through the future
                        # Any Python exception is a python_error (a std::exception) in
                        # PyTorch: KeyboardInterrupt and SystemExit fail the GraphTask too.
                        current["task"] = prev_task
                        self.thread_on_exception(local_graph_task, fn, e)
                    finally:
                        grad_state["enabled"] = prev_mode
                        current["task"] = prev_task
                        current["node"] = prev_node
                elif fn is not None and self._observers:
                    self._send(_SKIPPED, local_graph_task, fn, None, "has_error")
                del task
                count_lock = local_graph_task._count_lock
                count_lock.acquire()  # decrement_outstanding, inlined (``with``, unrolled)
                try:
                    outstanding = local_graph_task.outstanding_tasks = \
                        local_graph_task.outstanding_tasks - 1
                finally:
                    count_lock.release()
                if not outstanding and self._leftover:  # nothing of it is left to expire
                    self._leftover.pop(local_graph_task.id, None)
                if self._observers:
                    self._send(_OUT_DEC, local_graph_task, fn, None, outstanding)
                # GraphTask::completed, inlined (it reads outstanding_tasks_ again)
                if not local_graph_task.outstanding_tasks or (
                        local_graph_task.exit_on_error and local_graph_task.has_error):
                    if local_graph_task.mark_as_completed_and_run_post_processing():
                        if self._observers:
                            err = local_graph_task.future_result.error()
                            self._send(_COMPLETION, local_graph_task, None, None,
                                       _error_words(err) if err is not None else None,
                                       local_graph_task.outstanding_tasks)
                    base_owner = local_graph_task.owner
                    # The owner may be asleep in pop(): send it a dummy task to wake it.
                    if tls.worker_device != base_owner and self.wake_owner:
                        owner_queue = self.ready_queue_by_index(
                            local_graph_task.cpu_ready_queue, base_owner)
                        if self._observers:
                            self._send(_WAKEUP, local_graph_task, None, owner_queue.name,
                                       owner_queue.name)
                        self._push(owner_queue, NodeTask(local_graph_task, None, InputBuffer(0)))

    def thread_on_exception(self, graph_task: GraphTask, fn: Node | None,
                            e: BaseException) -> None:
        if self._observers:
            self._emit("error", graph_task, fn, None, message=_error_words(e),
                       exc_type=type(e).__name__)
        if fn is not None and not getattr(e, "_autograd_node", None):
            try:
                e._autograd_node = fn.name()  # type: ignore[attr-defined]
                e.add_note(f"(raised in {fn.name()} during the backward pass)")
            except AttributeError:  # exceptions without __dict__ / notes
                pass
        first = not graph_task.future_completed
        graph_task.set_exception(e, fn)
        if first and graph_task.outstanding_tasks > 0:
            self._leftover[graph_task.id] = graph_task.weak_self  # its tasks may outlive it
        if first and self._observers:
            self._emit("completion", graph_task, None, None, error=_error_words(e),
                       outstanding=graph_task.outstanding_tasks)

    # --- Engine::evaluate_function -----------------------------------------------------------
    def evaluate_function(self, graph_task: GraphTask, func: Node, inputs: InputBuffer,
                          cpu_ready_queue: ReadyQueue) -> None:
        observing = bool(self._observers)
        exec_info = graph_task.exec_info
        if exec_info:
            fn_info = exec_info[func]
            new_inputs = inputs.buffer
            if not fn_info.needed:
                # Tensor pre-hooks always run, but only once: here if the node is skipped.
                new_inputs = self.call_tensor_pre_hooks(graph_task, func, list(inputs.buffer))
            if fn_info.captures is not None:
                with graph_task.mutex:
                    for capture in fn_info.captures:
                        graph_task.captured_vars[capture.output_idx] = \
                            new_inputs[capture.input_idx]
                        if observing:
                            self._emit("hook", graph_task, func, None, hook_kind="capture",
                                       modified=False, name=f"captured_vars[{capture.output_idx}]")
            if not fn_info.needed:
                if observing:
                    self._send(
                        _SKIPPED, graph_task, func, None,
                        "captured" if fn_info.captures else "not_needed")
                return

        if observing:
            self._send(_NODE_START, graph_task, func, None, func.name(),
                                      graph_task.reentrant_depth,
                                      self._summaries(inputs.buffer))
        if (func._pre_hooks or func._post_hooks or func._tensor_pre_hooks
                or func._retains_grad_hooks
                or isinstance(func, AccumulateGrad) and func.variable._backward_hooks):
            outputs = self.call_function(graph_task, func, inputs)
        else:  # call_function for a node without hooks (the common case, a leaf's
            # AccumulateGrad without tensor hooks included: its variable's), inlined;
            # the buffer is moved into the node (InputBuffer::variables(std::move(...))):
            # nothing reads it after
            outputs = func.apply(inputs.buffer)
            if type(outputs) is not list:
                outputs = list(outputs)
            # validate_outputs, inlined for its common case: as many gradients as edges,
            # each equal in shape, dtype and device to its InputMetadata (one tuple
            # comparison); anything else is validate_outputs' own work (it checks all).
            edges = func._next_edges
            if len(outputs) != len(edges):
                validate_outputs(edges, outputs, func)
            else:
                # (zip() and unpacking an Edge, a tuple subclass, each cost more than
                # the loop's work here: a counter and an Edge's items by index instead)
                i = -1
                for edge in edges:
                    i += 1
                    fn = edge[0]  # Edge.function
                    grad = outputs[i]
                    if fn is not None and grad is not None:
                        try:
                            meta = fn._input_metadata[edge[1]]  # Edge.input_nr
                        except IndexError:  # no metadata: validate_outputs skips it
                            validate_outputs(edges, outputs, func)
                            break
                        data = grad.data
                        if (data.shape, data.dtype, grad.device) != meta:
                            validate_outputs(edges, outputs, func)
                            break

        if not graph_task.keep_graph:
            func.release_variables()
        if observing:
            leaf = NULL
            if isinstance(func, AccumulateGrad):
                leaf = self._summarize(func.variable._grad)
            # Each output's summary, reused below by the buffer it moves into ("first"):
            # no code runs between, so the value cannot have changed.
            full = self.record_values
            of = self.summary_of
            out_sums = {id(o): of(o, full) for o in outputs if o is not None}
            self._send(_NODE_END, graph_task, func, None, func.name(),
                       raw_list([out_sums[id(o)] if o is not None else NULL
                                 for o in outputs]), leaf)

        if not outputs:  # num_outputs == 0
            return

        if _anomaly["enabled"] and _anomaly["check_nan"]:  # is_anomaly_enabled(), inlined
            for i, output in enumerate(outputs):
                if output is not None and _isnan_any(output):
                    raise RuntimeError(
                        f"Function '{func.name()}' returned nan values in its {i}th output."
                    )

        fid = self.node_id(func) if observing else None  # from_node of the events below
        # dependencies, not_ready and the queues are guarded by the GraphTask's mutex
        # (``with``, unrolled: half the cost of __enter__/__exit__, once per node).
        mutex = graph_task.mutex
        mutex.acquire()
        try:
            dependencies = graph_task.dependencies
            not_ready = graph_task.not_ready
            # validate_outputs made len(outputs) == len(func._next_edges)
            i = -1
            for edge in func._next_edges:  # (no zip(), no unpacking: see above)
                i += 1
                next_fn = edge[0]  # Edge.function
                if next_fn is None:
                    continue
                input_nr = edge[1]  # Edge.input_nr
                output = outputs[i]
                is_ready = False
                try:  # (a subscript costs less than dict.get; a miss is an engine error)
                    count = dependencies[next_fn] - 1
                except KeyError:
                    raise RuntimeError(f"dependency not found for {next_fn.name()}") from None
                if count == 0:
                    del dependencies[next_fn]
                    is_ready = True
                else:
                    dependencies[next_fn] = count
                if observing:
                    self._send(_DEP_DEC, graph_task, next_fn, None, fid, input_nr, count)

                input_buffer = not_ready.get(next_fn)
                if input_buffer is None:
                    # Skip functions that aren't supposed to be executed
                    if exec_info:
                        info = exec_info.get(next_fn)
                        if info is None or not info.should_execute():
                            if observing:
                                self._send(_SKIPPED, graph_task, next_fn, None,
                                           "not_needed")
                            continue
                    # No buffer yet for this node: make one (InputBuffer's constructor and
                    # InputBuffer.add into an empty slot, and num_inputs, non-virtual in
                    # function.h, inlined: the gradient is moved in).
                    input_buffer = _new_buffer(InputBuffer)
                    buffer = input_buffer.buffer = [None] * len(next_fn._input_metadata)
                    if output is not None:
                        buffer[input_nr] = output
                    if observing:
                        self._send(
                            _BUF_ACC, graph_task, next_fn, None, input_nr,
                            "first" if output is not None else "undefined",
                            out_sums[id(output)] if output is not None else NULL, fid)
                    if is_ready:
                        # input_buffer.device(), inlined: one slot at most is defined
                        device = output.device if output is not None else "cpu"
                        queue = (cpu_ready_queue if device == "cpu"
                                 else self.ready_queue(cpu_ready_queue, device))
                        if self._observers:
                            self._push(queue, NodeTask(graph_task, next_fn, input_buffer))
                        else:  # _push without observers, inlined
                            queue.push_node(graph_task, next_fn, input_buffer)
                    else:
                        not_ready[next_fn] = input_buffer
                        if observing:
                            self._send(
                                _NR_INSERT, graph_task, next_fn, None,
                                [v is not None for v in input_buffer.buffer])
                else:
                    # The node already has a buffer in not_ready: accumulate into it.
                    if (not observing and output is not None and type(output) is Tensor
                            and not getattr(grad_tls, "enabled", True)):
                        # InputBuffer.add's common case, inlined: two of our tensors
                        # summed out of place, no graph recorded (no create_graph).
                        buffer = input_buffer.buffer
                        old = buffer[input_nr]
                        if old is None:
                            buffer[input_nr] = output
                        elif type(old) is Tensor:
                            buffer[input_nr] = _tensor_of(old.data + output.data, old.device)
                        else:
                            input_buffer.add(input_nr, output)
                        mode = ""
                    else:
                        mode = input_buffer.add(input_nr, output)
                    if observing:
                        self._send(
                            _BUF_ACC, graph_task, next_fn, None, input_nr, mode,
                            self._summarize(input_buffer.buffer[input_nr]), fid)
                    if is_ready:
                        del not_ready[next_fn]
                        if observing:
                            self._send(_NR_REMOVE, graph_task, next_fn, None)
                        device = input_buffer.device()
                        queue = (cpu_ready_queue if device == "cpu"
                                 else self.ready_queue(cpu_ready_queue, device))
                        if self._observers:
                            self._push(queue, NodeTask(graph_task, next_fn, input_buffer))
                        else:  # _push without observers, inlined
                            queue.push_node(graph_task, next_fn, input_buffer)
        finally:
            mutex.release()

    # --- call_function and hooks ----------------------------------------------------------------
    def call_function(self, graph_task: GraphTask, func: Node,
                      input_buffer: InputBuffer) -> list[Tensor | None]:
        if not (func._pre_hooks or func._post_hooks or func._tensor_pre_hooks
                or func._retains_grad_hooks or isinstance(func, AccumulateGrad)):
            # No hook of any kind: the common case, without the hook machinery.
            outputs = func.apply(list(input_buffer.buffer))
            if not isinstance(outputs, list):
                outputs = list(outputs)
            validate_outputs(func._next_edges, outputs, func)
            return outputs
        inputs = self.call_tensor_pre_hooks(graph_task, func, InputBuffer.variables(input_buffer))
        inputs = self.call_pre_hooks(graph_task, func, inputs)
        outputs = func.apply(list(inputs))
        if not isinstance(outputs, list):
            outputs = list(outputs)
        validate_outputs(func._next_edges, outputs, func)
        if func._post_hooks:
            return self.call_post_hooks(graph_task, func, outputs, inputs)
        return outputs

    def call_tensor_pre_hooks(self, graph_task: GraphTask, fn: Node,
                              inputs: list[Tensor | None]) -> list[Tensor | None]:
        observing = bool(self._observers)
        if isinstance(fn, AccumulateGrad):
            groups: Any = [(0, fn.variable._backward_hooks)] if fn.variable._backward_hooks else []
        else:
            groups = fn._tensor_pre_hooks.items()
        for nr, hooks in groups:
            for hook in list(hooks):
                result = hook(inputs[nr])
                if result is not None and result is not inputs[nr]:
                    check_single_result(inputs[nr], result, hook)
                    inputs[nr] = result
                if observing:
                    self._emit("hook", graph_task, fn, None, hook_kind="tensor_pre",
                               modified=result is not None, name=_hook_name(hook))
        for nr, hook in fn._retains_grad_hooks.items():
            hook(inputs[nr])
            if observing:
                self._emit("hook", graph_task, fn, None, hook_kind="retain_grad",
                           modified=False, name="retain_grad")
        return inputs

    def call_pre_hooks(self, graph_task: GraphTask, fn: Node,
                       inputs: list[Tensor | None]) -> list[Tensor | None]:
        for hook in list(fn._pre_hooks):
            result = hook(tuple(inputs))
            if result is not None:
                check_result(inputs, result, hook)
                inputs = list(result)
            if self._observers:
                self._emit("hook", graph_task, fn, None, hook_kind="pre",
                           modified=result is not None, name=_hook_name(hook))
        return inputs

    def call_post_hooks(self, graph_task: GraphTask, fn: Node, outputs: list[Tensor | None],
                        inputs: list[Tensor | None]) -> list[Tensor | None]:
        for hook in list(fn._post_hooks):
            result = hook(tuple(outputs), tuple(inputs))
            if result is not None:
                check_result(outputs, result, hook)
                outputs = list(result)
            if self._observers:
                self._emit("hook", graph_task, fn, None, hook_kind="post",
                           modified=result is not None, name=_hook_name(hook))
        return outputs

    # --- final callbacks ------------------------------------------------------------------------
    def queue_callback(self, callback: Callable[[], Any]) -> None:
        gt = get_current_graph_task()
        if gt is None:
            raise RuntimeError("Final callbacks can only be installed during backward pass.")
        with gt.final_callbacks_lock:
            gt.final_callbacks.append(callback)

    # --- threads --------------------------------------------------------------------------------
    def _start_thread(self, name: str, target: Callable[..., None], *args: Any) -> None:
        t: Any
        if hasattr(self.waits, "spawn"):  # a tracker that runs the threads (greenlets)
            t = CarriedThread(self._thread_body, (name, target, *args), f"autograd {name}")
        else:
            t = threading.Thread(target=self._thread_body, args=(name, target, *args),
                                 name=f"autograd {name}", daemon=True)
        with self._lock:
            self._threads.append(t)
        if self.waits is not None:
            self.waits.register_thread(name)  # before it runs, so a step waits for it
        start_thread(t, self.waits)  # a deep stack: it may free a program's PyTorch graph

    def _thread_body(self, name: str, target: Callable[..., None], *args: Any) -> None:
        self._tls.name = name
        _set_thread_engine(self)
        waits = self.waits
        try:
            if waits is not None:
                waits.thread_begin(name)
            target(*args)
            if self._observers:
                self._send(_THREAD_EXIT, None, None, None)
        except ThreadAborted:
            pass  # torn down by the controller
        finally:
            if waits is not None:
                waits.thread_end(name)

    def thread_init(self, device: int, ready_queue: ReadyQueue) -> None:
        """A device thread: serve ``ready_queue`` until a shutdown task arrives."""
        tls = self._tls
        tls.worker_device = device
        set_device(device)
        tls.current_depth = 0
        tls.total_depth = 0
        self.init_local_ready_queue(ready_queue)
        if self._observers:
            self._send(_THREAD_START, None, None, ready_queue.name, "device")
        self.thread_main(None)

    def add_thread_pool_task(self, graph_task: GraphTask) -> None:
        tp = self.thread_pool_shared
        with tp.mutex:
            # Tasks may already be waiting for too few idle workers: then add a thread.
            create_thread = tp.num_workers <= len(tp.graphtasks_queue)
            if self.reentrant_pool_size is not None and tp.num_threads >= self.reentrant_pool_size:
                create_thread = False
            tp.graphtasks_queue.append(weakref.ref(graph_task))
            if create_thread:
                tp.num_threads += 1
                n = tp.num_threads
        if create_thread:
            self._start_thread(f"reentrant-pool-{n}", self.reentrant_thread_init, n)
        with tp.mutex:
            tp.notify_waiters(self.waits)

    def reentrant_thread_init(self, n: int) -> None:
        """A pool thread: take GraphTasks handed off at the depth limit and run them."""
        tls = self._tls
        tp = self.thread_pool_shared
        if self._observers:
            self._emit("thread_start", None, None, None, role="pool")
        while True:
            with tp.mutex:
                idle = not tp.graphtasks_queue and not self._closed
            observing = idle and bool(self._observers)
            if observing:
                self._emit("thread_wait", None, None, None, on="pool", target="reentrant pool",
                           holder=None)
            with tp.mutex:
                tp.num_workers += 1
                waited = tp.wait_for(lambda: bool(tp.graphtasks_queue) or self._closed,
                                     self.waits)
                tp.num_workers -= 1
                task = tp.graphtasks_queue.popleft() if not self._closed else None
            if waited and self.waits is not None:
                self.waits.after_wait("pool", tp)
            if observing and task is not None:
                self._emit("thread_wake", None, None, None, on="pool", target="reentrant pool")
            if task is None:
                break
            graph_task = task()
            if graph_task is None:
                continue  # expired: nothing to run
            tls.worker_device = graph_task.owner
            set_device(graph_task.owner)
            tls.local_ready_queue = self.ready_queue_by_index(graph_task.cpu_ready_queue,
                                                              graph_task.owner)
            tls.total_depth = graph_task.reentrant_depth
            tls.current_depth = 0
            del task
            self.thread_main(graph_task)
            del graph_task

    # --- shutdown ---------------------------------------------------------------------------------
    def threads(self) -> list[threading.Thread]:
        with self._lock:
            return [t for t in self._threads if t.is_alive()]

    def close(self, timeout: float = 5.0) -> bool:
        """Stop every device and pool thread; True if all of them exited."""
        with self._lock:
            self._closed = True
            queues = list(self.device_ready_queues.values())
        for q in queues:
            q.push(NodeTask(None, None, InputBuffer(0), is_shutdown_task=True),
                   increment_outstanding_tasks=False)
        tp = self.thread_pool_shared
        with tp.mutex:
            tp.notify_waiters(self.waits, None)
        ok = True
        for t in list(self._threads):
            t.join(timeout)
            ok = ok and not t.is_alive()
        return ok

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _error_words(e: BaseException) -> str:
    """An error's message for events; the class name when it has none (KeyboardInterrupt())."""
    return str(e) or type(e).__name__


def _hook_name(hook: Any) -> str:
    return getattr(hook, "__qualname__", None) or getattr(hook, "__name__", None) or repr(hook)


def _isnan_any(t: Tensor) -> bool:

    return bool(np.isnan(t.data).any()) if t.data.dtype.kind in "fc" else False


def compute_min_topological_nr(outputs: Sequence[Edge]) -> int:
    if not outputs:
        return 0
    return min(e.function.topological_nr() for e in outputs if e.function is not None)


def validate_outputs(edges: Sequence[Edge], grads: list[Tensor | None],
                     producer: Node | None = None) -> None:
    """Check each gradient against the metadata of the input it flows to; sum a
    broadcast gradient back to shape and cast its dtype, as PyTorch does.  Errors
    name ``producer`` ("Function MulBackward0 returned an invalid gradient ...")."""
    if len(grads) != len(edges):
        raise _invalid(producer, f"invalid number of gradients - expected {len(edges)}, "
                                 f"but got {len(grads)}")
    i = 0
    for grad, (fn, input_nr) in zip(grads, edges):
        if fn is not None and grad is not None:
            try:
                metadata = fn._input_metadata[input_nr]
            except IndexError:  # no metadata for this input: nothing to check
                i += 1
                continue
            data = grad.data
            # The common case, nothing to check further: shape, dtype and device equal to
            # the InputMetadata (a tuple), compared in one go (a dtype is mostly the same
            # object, which the comparison takes as equal at once).
            if (data.shape, data.dtype, grad.device) != metadata:
                grads[i] = _validate_output(i, grad, metadata, producer)
        i += 1


def _invalid(producer: Node | None, msg: str) -> RuntimeError:
    return RuntimeError(f"Function {producer.name()} returned an {msg}"
                        if producer is not None else msg)


def _validate_output(i: int, grad: Tensor, metadata: Any, producer: Node | None) -> Tensor:
    """``validate_outputs`` for one gradient whose shape, dtype or device differs."""
    shape = tuple(grad.data.shape)
    if shape != metadata.shape:
        from .ops import is_expandable_to, sum_to

        if not is_expandable_to(metadata.shape, shape):
            raise _invalid(producer, f"invalid gradient at index {i} - got {list(shape)} but "
                                     f"expected shape compatible with {list(metadata.shape)}")
        grad = sum_to(grad, metadata.shape)
    if grad.dtype != metadata.dtype and grad.dtype.kind in "fc":
        grad = grad.to(dtype=metadata.dtype)
    if grad.device != metadata.device:
        if grad.ndim == 0:
            grad = grad.to(metadata.device)
        else:
            raise _invalid(producer, f"invalid gradient at index {i} - expected device "
                                     f"{metadata.device} but got {grad.device}")
    return grad


# --- the engine a thread uses ---------------------------------------------------------------
_thread_engine = threading.local()
_default_engine: Engine | None = None
_default_lock = threading.Lock()


def _set_thread_engine(engine: Engine | None) -> None:
    _thread_engine.engine = engine


def get_default_engine() -> Engine:
    """The engine ``backward()`` uses: the engine of this worker thread, else the default."""
    eng = getattr(_thread_engine, "engine", None)
    if eng is not None:
        return eng
    global _default_engine
    with _default_lock:
        if _default_engine is None or _default_engine._closed:
            _default_engine = Engine()
        return _default_engine


def set_default_engine(engine: Engine | None) -> Engine | None:
    """Make ``engine`` the default for every thread; returns the previous one."""
    global _default_engine
    with _default_lock:
        prev, _default_engine = _default_engine, engine
    return prev


# TrackedLock and Signal (sync.py) report to the tracker of the engine their thread uses.
set_tracker_lookup(lambda: get_default_engine().waits)


class use_engine:  # noqa: N801 - reads like a function: ``with use_engine(eng):``
    """Run backward passes on the calling thread with ``engine``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def __enter__(self) -> Engine:
        self._prev = getattr(_thread_engine, "engine", None)
        _thread_engine.engine = self.engine
        return self.engine

    def __exit__(self, *exc: object) -> None:
        _thread_engine.engine = self._prev


def shutdown_default_engine() -> bool:
    global _default_engine
    with _default_lock:
        eng, _default_engine = _default_engine, None
    return eng.close() if eng is not None else True
