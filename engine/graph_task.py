"""``GraphTask``: the state of one ``backward()``/``grad()`` call.

Mirrors ``torch/csrc/autograd/graph_task.h`` and the GraphTask methods in
``engine.cpp``: ``outstanding_tasks``, ``dependencies``, ``not_ready``,
``exec_info`` with ``Capture``s for ``grad()``, ``captured_vars``, ``owner``,
``reentrant_depth``, ``has_error``/``exit_on_error``, final callbacks,
``completed``, ``mark_as_completed_and_run_post_processing``,
``exec_post_processing``, ``set_exception`` and ``init_to_execute``; and the
``at::ivalue::Future`` the owner waits on (``Future`` below).  Under anomaly mode the
first error prints the failing node's forward stack as PyTorch's ``print_stack`` does
(python_anomaly_mode.cpp: a ``UserWarning``, its text word for word).

Departures: no streams (``leaf_streams``, ``caller_current_streams_``), no
ThreadLocalState or warning handler replay; ``outstanding_tasks`` is guarded
by a small lock instead of being a C++ atomic.
"""

from __future__ import annotations

import itertools
import threading
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .ready_queue import graph_task_died
from .sync import ThreadAborted, Waitable, condition

if TYPE_CHECKING:
    from .graph import Edge, Node
    from .input_buffer import InputBuffer
    from .ready_queue import ReadyQueue
    from .tensor import Tensor

NO_DEVICE = -2
CPU_DEVICE = -1

_current = threading.local()  # the thread's current GraphTask (GraphTaskGuard)


def get_current_graph_task() -> GraphTask | None:
    return getattr(_current, "task", None)


def get_current_node() -> Node | None:
    """The node this thread is evaluating (engine.cpp's ``current_evaluating_node``,
    set by ``NodeGuard`` in ``thread_main``), or None."""
    return getattr(_current, "node", None)


class GraphTaskGuard:
    """Sets the thread-local current GraphTask for ``queue_callback``."""

    __slots__ = ("_task", "_prev")

    def __init__(self, task: GraphTask) -> None:
        self._task = task

    def __enter__(self) -> None:
        self._prev = getattr(_current, "task", None)
        _current.task = self._task

    def __exit__(self, *exc: object) -> None:
        _current.task = self._prev


class Future(Waitable):
    """``at::ivalue::Future``: completed with a value or an error, waited on by the owner."""

    wait_kind = "future"

    def __init__(self, name: str = "future", waits: Any = None,
                 graph_task_id: int | None = None) -> None:
        self.name = name
        self.graph_task_id = graph_task_id
        self._cond = condition()
        self._waiters: list[int] = []
        self._completed = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._waits = waits

    def completed(self) -> bool:
        return self._completed

    def _complete(self, value: Any, error: BaseException | None, strict: bool) -> None:
        with self._cond:
            if self._completed:
                if strict:
                    raise RuntimeError("Future already completed")
                return
            self._value, self._error = value, error
            self._completed = True
            self.notify_waiters(self._waits, None)

    def mark_completed(self, value: Any) -> None:
        self._complete(value, None, strict=True)

    def set_error(self, error: BaseException) -> None:
        self._complete(None, error, strict=True)

    def set_error_if_needed(self, error: BaseException) -> None:
        self._complete(None, error, strict=False)

    def wait(self) -> None:
        with self._cond:
            waited = self.wait_for(lambda: self._completed, self._waits)
        if waited and self._waits is not None:
            self._waits.after_wait("future", self)

    def take_error(self) -> BaseException | None:
        """Hand the error to the caller that re-raises it, and forget it here."""
        with self._cond:
            err, self._error = self._error, None
            return err

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> BaseException | None:
        return self._error

    def value(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value


def print_stack(fn: Node) -> None:
    """``AnomalyMetadata::print_stack`` (``_print_stack``): where the failing node's forward
    op was called, as a warning (PyTorch's ``TORCH_WARN``), or that nothing was recorded."""
    stack = fn.metadata.get("traceback_")
    if stack is None:
        warnings.warn(f"Error detected in {fn.name()}. No forward pass information available. "
                      "Enable detect anomaly during forward pass for more information.",
                      UserWarning, stacklevel=2)
        return
    warnings.warn(f"Error detected in {fn.name()}. Traceback of forward call that caused the "
                  f"error:\n{stack}", UserWarning, stacklevel=2)


@dataclass
class Capture:
    """``ExecInfo::Capture``: gradient of input ``input_idx`` -> ``captured_vars[output_idx]``."""

    input_idx: int
    output_idx: int


@dataclass
class ExecInfo:
    needed: bool = False
    captures: list[Capture] | None = None

    def should_execute(self) -> bool:
        return self.needed or self.captures is not None


_graph_task_ids = itertools.count(1)


@dataclass(eq=False)
class GraphTask:
    keep_graph: bool
    grad_mode: bool  # create_graph: grad mode while running nodes
    reentrant_depth: int
    cpu_ready_queue: ReadyQueue
    graph_roots: list[Node] = field(default_factory=list)
    exit_on_error: bool = False
    id: int = 0
    outstanding_tasks: int = 0
    has_error: bool = False
    future_completed: bool = False
    owner: int = NO_DEVICE
    not_ready: dict[Node, InputBuffer] = field(default_factory=dict)
    dependencies: dict[Node, int] = field(default_factory=dict)
    nodes_in_graph: set[Node] = field(default_factory=set)
    exec_info: dict[Node, ExecInfo] = field(default_factory=dict)
    captured_vars: list[Tensor | None] = field(default_factory=list)
    final_callbacks: list[Callable[[], Any]] = field(default_factory=list)
    error_node: str | None = None
    future_result: Future = field(init=False)
    mutex: Any = field(init=False)
    final_callbacks_lock: Any = field(init=False)
    _count_lock: Any = field(init=False, repr=False)
    engine: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # Shared by every NodeTask of this GraphTask; its death re-keys the ReadyQueues.
        self.weak_self = weakref.ref(self, graph_task_died)
        if not self.id:
            self.id = next(_graph_task_ids)
        waits = self.engine.waits if self.engine is not None else None
        self.future_result = Future(f"GraphTask {self.id}", waits, self.id)
        self.mutex = self.engine.make_lock(f"GraphTask {self.id} mutex") if self.engine else \
            threading.Lock()
        self.final_callbacks_lock = threading.Lock()
        self._count_lock = threading.Lock()

    # --- outstanding_tasks (an atomic in C++) --------------------------------------
    def increment_outstanding(self) -> None:
        with self._count_lock:
            self.outstanding_tasks += 1

    def decrement_outstanding(self) -> int:
        with self._count_lock:
            self.outstanding_tasks -= 1
            return self.outstanding_tasks

    def completed(self) -> bool:
        """``GraphTask::completed``: no outstanding task, or an error with exit_on_error."""
        return self.outstanding_tasks == 0 or (self.exit_on_error and self.has_error)

    # --- completion ---------------------------------------------------------------
    def mark_as_completed_and_run_post_processing(self) -> bool:
        """Run post-processing once and complete the future; False if another thread did."""
        with self._count_lock:
            already = self.future_completed
            self.future_completed = True
        if already:
            self.future_result.wait()
            return False
        try:
            with self.mutex:
                self.exec_post_processing()
                vars_ = self.captured_vars
                self.captured_vars = []
            self.future_result.mark_completed(vars_)
        except ThreadAborted:
            raise  # the controller's teardown
        except BaseException as e:  # noqa: BLE001 - the caller re-raises it from the future
            # A final callback's KeyboardInterrupt or SystemExit is a python_error too.
            self.future_result.set_error_if_needed(e)
        return True

    def exec_post_processing(self) -> None:
        if self.not_ready:
            raise RuntimeError("could not compute gradients for some functions")
        # Final callbacks may queue more callbacks: re-read the length each time.
        with GraphTaskGuard(self):
            i = 0
            while True:
                with self.final_callbacks_lock:
                    if i >= len(self.final_callbacks):
                        break
                    cb = self.final_callbacks[i]
                if self.engine is not None and self.engine._observers:
                    self.engine._emit("hook", self, None, None, hook_kind="final_callback",
                                      modified=False, name=getattr(cb, "__name__", repr(cb)))
                cb()
                i += 1

    def set_exception_without_signal(self, fn: Node | None) -> bool:
        with self._count_lock:
            first = not self.has_error
            self.has_error = True
        if first and fn is not None:
            self.error_node = fn.name()
            from .grad_mode import is_anomaly_enabled

            if is_anomaly_enabled():
                print_stack(fn)
        return first

    def set_exception(self, error: BaseException, fn: Node | None) -> None:
        self.set_exception_without_signal(fn)
        with self._count_lock:
            already = self.future_completed
            self.future_completed = True
        if not already:
            self.future_result.set_error(error)

    # --- exec_info for grad() / backward(inputs=...) ----------------------------------
    def init_to_execute(self, graph_root: Node, outputs: list[Edge], accumulate_grad: bool,
                        min_topo_nr: int) -> None:
        """Mark ``needed`` every node with a path to an output edge (iterative DFS, as in C++)."""
        exec_info = self.exec_info
        output_idx = 0
        for edge in outputs:
            info = exec_info.setdefault(edge.function, ExecInfo())
            if accumulate_grad:
                info.needed = True
            else:
                if info.captures is None:
                    info.captures = []
                info.captures.append(Capture(edge.input_nr, output_idx))
                output_idx += 1
        self.captured_vars = [None] * output_idx

        def should_execute(fn: Node) -> bool:
            info = exec_info.get(fn)
            return info is not None and info.should_execute()

        # Each frame: [node, index of the next edge to look at]
        stack: list[list[Any]] = [[graph_root, 0]]
        seen: set[Node] = set()
        exec_info.setdefault(graph_root, ExecInfo())
        while stack:
            frame = stack[-1]
            fn = frame[0]
            child = None
            edges = fn.next_edges()
            while frame[1] < len(edges):
                cand = edges[frame[1]].function
                frame[1] += 1
                if cand is None:
                    continue
                if cand in seen:
                    if should_execute(cand):  # (1) seen child that executes
                        exec_info.setdefault(fn, ExecInfo()).needed = True
                    continue
                seen.add(cand)
                child = cand
                break
            if child is not None:
                if child.topological_nr() < min_topo_nr:
                    continue  # created before the first output: no path to it
                stack.append([child, 0])  # (2)
            else:
                stack.pop()  # (3) fn is final: tell the parent
                if should_execute(fn) and stack:
                    exec_info.setdefault(stack[-1][0], ExecInfo()).needed = True
