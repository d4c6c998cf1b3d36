"""DistributedDataParallel under the bridge: its gradient synchronization as PyTorch runs
it, and seen as events.

DDP's reducer (``reducer.cpp``) puts a C++ post hook on each parameter's
``AccumulateGrad`` (``autograd_hook`` -> ``mark_variable_ready``); when a bucket's last
gradient is in, and every bucket before it is launched, it runs the communication hook
(``run_comm_hook``: an all-reduce, whose future it keeps), and when the last bucket is
launched it queues ``finalize_backward`` with ``Engine::queue_callback``, which waits for
every all-reduce and writes the averaged ``.grad``.  The bridge runs each
``AccumulateGrad`` through PyTorch's engine (``hooks.accumulate``), so all of that
happens as under PyTorch; this module only watches it:

==========================  ==========================================================
event                       observed at
==========================  ==========================================================
``ddp_bucket_assigned``     the first gradient's hook (DDP's buckets, one event each)
``ddp_bucket_ready``        the bucket's last gradient accumulated (``pending == 0`` in
                            ``mark_variable_ready``: the reducer's rules, unused
                            parameters marked ready at the first hook with
                            ``find_unused_parameters``), or, at the latest, its launch
``ddp_allreduce_start``     the communication hook called (``run_comm_hook``); the
                            bucket known by its parameters (``GradBucket.index()`` is
                            the reducer's next bucket in ``delay_all_reduce``)
``ddp_allreduce_end``       the hook's future done (a done callback), reported on the engine
                            thread at its next node or at the end of the backward
``ddp_finalize``            ``finalize_backward`` has run (all buckets launched)
``ddp_bucket_never_ready``  the end of the backward with a bucket still pending: its
                            parameters that got no gradient on this rank
==========================  ==========================================================

Departures, and why:
- The communication hook is wrapped to see the all-reduce: the program's own hook
  (``register_comm_hook`` during the forward pass) is wrapped, not replaced; with none,
  PyTorch's Python ``allreduce_hook`` is registered, which divides by the world size in
  the hook rather than while copying into the bucket (the same bits for a power-of-two
  world size, one rounding apart otherwise).  A built-in C++ hook, or a hook registered
  before the forward pass ran under the tool, is not seen: no all-reduce events then.
- ``finalize_backward`` is queued by C++ onto PyTorch's current GraphTask, the one-node
  GraphTask that ran the ``AccumulateGrad`` whose hook launched the last bucket; so it
  runs when that node ends, not when the whole backward ends.  Every parameter of DDP
  has its gradient by then, so the gradients are PyTorch's; only the moment differs.
- ``Variable._execution_engine.queue_callback`` (``_DDPSink``'s, for ``static_graph``'s
  delayed all-reduce) queues onto our GraphTask while a bridged backward runs
  (``install``): it runs at our backward's end, as PyTorch runs it at its own.
- The end-of-backward check (``ddp_check``) is a final callback of ours.
- A parameter is named as the reducer names it in its own error ("Parameters which did
  not receive grad for rank 1: b.bias, b.weight", ``TORCH_DISTRIBUTED_DEBUG=INFO`` or
  ``DETAIL``): ``param_names`` follows ``_build_debug_param_to_name_mapping``.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import threading
import weakref
from collections.abc import Iterator
from typing import Any

from ..graph_task import get_current_graph_task, get_current_node
from .convert import torch_module

_seen: weakref.WeakSet[Any] = weakref.WeakSet()  # DDP modules a watched forward called
ACTIVE: list[Tracker] = []  # one per DDP module, while a bridged backward runs
_lock = threading.Lock()


def emit(kind: str, **data: Any) -> None:
    """A DDP event on this thread's GraphTask and node of our engine, if observed."""
    gt = get_current_graph_task()
    eng = getattr(gt, "engine", None)
    if eng is None or not eng._observers:
        return
    eng._emit(kind, gt, get_current_node(), None, **data)


def param_names(ddp: Any) -> dict[int, str]:
    """Parameter id -> the name DDP gives it in its errors, by the rule of
    ``DistributedDataParallel._build_debug_param_to_name_mapping``: the module's path in
    the wrapped module, a dot, the parameter's name (so no ``module.`` prefix, and a
    parameter of the wrapped module itself reads ``.weight``); a parameter shared by
    several modules takes its last module's name; ignored and frozen ones are not named."""
    ignore = getattr(ddp, "parameters_to_ignore", ()) or ()
    names: dict[int, str] = {}
    for module_name, module in ddp.module.named_modules():
        for name, p in module.named_parameters(recurse=False):
            fqn = f"{module_name}.{name}"
            if fqn not in ignore and p.requires_grad:
                names[id(p)] = fqn
    return names


class Tracker:
    """One DDP module's buckets during one backward: what arrived, launched, finished."""

    def __init__(self, ddp: Any, leaves: set[int]) -> None:
        self.ddp, self.rank = ddp, int(ddp.process_group.rank())
        names = param_names(ddp)
        self.names = names
        self.buckets: dict[int, list[str]] = {}
        self.pending: dict[int, set[int]] = {}
        self.ids: dict[int, list[int]] = {}
        self.of: dict[int, int] = {}  # param id -> bucket index
        for b in ddp.reducer._get_zeros_like_grad_buckets():
            ps = list(b.parameters())
            self.buckets[b.index()] = [names.get(id(p), "?") for p in ps]
            self.pending[b.index()] = {id(p) for p in ps}
            self.ids[b.index()] = [id(p) for p in ps]
            for p in ps:
                self.of[id(p)] = b.index()
        self.static_graph = bool(getattr(ddp, "static_graph", False))
        self.find_unused = bool(getattr(ddp, "find_unused_parameters", False))
        # static_graph's first iteration: the reducer only counts, all-reduces at the end
        self.delayed = self.static_graph and not getattr(
            ddp, "_static_graph_delay_allreduce_enqueued", True)
        self.unused = {i for i in self.of if i not in leaves} \
            if (self.find_unused or self.static_graph) and not self.delayed else set()
        self.ready: set[int] = set()
        self.started: set[int] = set()
        self.ended: collections.deque[int] = collections.deque()  # from gloo's thread
        self.reported: set[int] = set()  # ddp_allreduce_end emitted
        self.first = True
        self.finalized = False
        self.checked = False
        self.queued = False  # ddp_check queued on the top-level GraphTask

    def bucket_ready(self, k: int) -> None:
        if k not in self.ready:
            self.ready.add(k)
            emit("ddp_bucket_ready", rank=self.rank, bucket=k, params=self.buckets.get(k, []))

    def arrived(self, pid: int) -> None:
        """A parameter's gradient accumulated (the reducer's ``autograd_hook``)."""
        if self.first:  # the buckets, then the unused parameters marked ready
            self.first = False
            for k in sorted(self.buckets):
                emit("ddp_bucket_assigned", rank=self.rank, bucket=k, params=self.buckets[k])
            for u in self.unused:
                self._mark(u)
        if not self.delayed:
            self._mark(pid)

    def _mark(self, pid: int) -> None:
        k = self.of.get(pid)
        if k is None:
            return
        left = self.pending[k]
        left.discard(pid)
        if not left:
            self.bucket_ready(k)

    def flush(self) -> None:
        """The all-reduces that finished since the last look; finalize once all launched
        (``finalize_backward`` has then waited for each: the ones whose done callback has
        not run yet, as a future runs its callbacks after waking its waiters, are done)."""
        while self.ended:
            self._end(self.ended.popleft())
        if not self.finalized and self.buckets and len(self.started) == len(self.buckets):
            self.finalized = True
            for k in sorted(self.started - self.reported):
                self._end(k)
            emit("ddp_finalize", rank=self.rank, buckets=len(self.buckets))

    def _end(self, k: int) -> None:
        if k not in self.reported:
            self.reported.add(k)
            emit("ddp_allreduce_end", rank=self.rank, bucket=k)

    def check(self) -> None:
        """``ddp_check``: at the end of the backward, the buckets still pending."""
        if self.checked:
            return
        self.checked = True
        self.flush()
        for k in sorted(self.buckets):
            if k not in self.ready:
                missing = [self.names.get(i, "?") for i in self.ids[k] if i in self.pending[k]]
                emit("ddp_bucket_never_ready", rank=self.rank, bucket=k,
                     params=self.buckets[k], missing=missing, find_unused=self.find_unused,
                     static_graph=self.static_graph)


def comm_hook(ddp: Any, hook: Any) -> Any:
    """The DDP module's communication hook, wrapped: the all-reduce's start and end.  (No
    annotations: DDP's ``_check_comm_hook`` reads them, and wants a ``bucket`` argument.)"""
    ref = weakref.ref(ddp)
    name = getattr(hook, "__qualname__", None) or repr(hook)

    def wrapped(state, bucket):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202
        tr = next((t for t in ACTIVE if t.ddp is ref()), None)
        if tr is None:
            return hook(state, bucket)
        # the bucket by its parameters: static_graph's delayed all-reduce gives every
        # GradBucket the index of the reducer's next bucket (0), not its own
        ps = bucket.parameters()
        k = tr.of.get(id(ps[0]), int(bucket.index())) if ps else int(bucket.index())
        tr.bucket_ready(k)
        tr.started.add(k)
        emit("ddp_allreduce_start", rank=tr.rank, bucket=k, hook=name)
        fut = hook(state, bucket)

        def done(f):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202
            tr.ended.append(k)  # on the communication thread: reported by flush()

        fut.add_done_callback(done)  # the reducer waits on the hook's own future
        return fut

    wrapped.__qualname__ = wrapped.__name__ = name
    wrapped._agt_inner = hook  # type: ignore[attr-defined]
    return wrapped


@contextlib.contextmanager
def watch() -> Iterator[None]:
    """During a program's forward pass: the DDP modules called, their comm hooks wrapped."""
    torch = torch_module()
    if not torch.distributed.is_available():
        yield
        return
    cls = torch.nn.parallel.DistributedDataParallel
    forward, register = cls.forward, cls.register_comm_hook

    def watched_forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        _seen.add(self)
        self._agt_synced = torch.is_grad_enabled() and self.require_backward_grad_sync
        return forward(self, *args, **kwargs)

    def watched_register(self: Any, state: Any, hook: Any) -> None:
        _seen.add(self)
        register(self, state, hook if hasattr(hook, "_agt_inner") else comm_hook(self, hook))

    cls.forward, cls.register_comm_hook = watched_forward, watched_register
    try:
        yield
    finally:
        cls.forward, cls.register_comm_hook = forward, register


def watching() -> bool:
    """Some DDP module's forward ran under ``watch`` (and the module is alive)."""
    return bool(_seen) and not ACTIVE


@contextlib.contextmanager
def backward_scope(leaves: set[int]) -> Iterator[None]:
    """Around a bridged backward (the outermost): a ``Tracker`` per DDP module whose
    forward prepared a backward, its hook wrapped (PyTorch's ``allreduce_hook`` if none)."""
    if ACTIVE or not _seen:
        yield
        return
    torch = torch_module()
    trackers = []
    for ddp in list(_seen):
        if not getattr(ddp, "_agt_synced", False) or getattr(ddp, "reducer", None) is None \
                or not any(id(p) in leaves for p in ddp.parameters()):
            continue
        if not ddp._comm_hooks:
            from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

            try:
                torch.nn.parallel.DistributedDataParallel.register_comm_hook(
                    ddp, ddp.process_group, comm_hook(ddp, allreduce_hook))
            except RuntimeError:  # a built-in (C++) hook is registered: not seen
                pass
        trackers.append(Tracker(ddp, leaves))
    ACTIVE.extend(trackers)
    try:
        yield
    finally:
        ACTIVE.clear()


def after_accumulate(var: Any) -> None:
    """After an ``AccumulateGrad`` of the leaf ``var`` ran (its hooks included)."""
    pid = id(var)
    for tr in ACTIVE:
        tr.arrived(pid)
        tr.flush()
        gt = get_current_graph_task()
        if not tr.checked and getattr(gt, "reentrant_depth", 0) == 0 and gt is not None \
                and not tr.queued:
            tr.queued = True
            gt.engine.queue_callback(_check_callback(tr))


def _check_callback(tr: Tracker) -> Any:
    def ddp_check() -> None:
        tr.check()
    return ddp_check


# --- Variable._execution_engine.queue_callback onto our GraphTask ----------------------------
class _EngineProxy:
    """PyTorch's engine object, but ``queue_callback`` queues onto our running GraphTask."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def queue_callback(self, callback: Any) -> None:
        gt = get_current_graph_task()
        if gt is not None and getattr(gt, "engine", None) is not None:
            mode = bool(gt.grad_mode)

            @functools.wraps(callback)
            def in_grad_mode() -> Any:  # exec_post_processing: the GraphTask's grad mode
                with torch_module().set_grad_enabled(mode):
                    return callback()

            gt.engine.queue_callback(in_grad_mode)
        else:
            self._real.queue_callback(callback)


_depth = 0


def install() -> None:
    """``Variable._execution_engine`` answered by ``_EngineProxy`` (counted)."""
    global _depth
    var = torch_module().autograd.Variable
    with _lock:
        _depth += 1
        if _depth == 1:
            var._execution_engine = _EngineProxy(var._execution_engine)


def uninstall() -> None:
    global _depth
    var = torch_module().autograd.Variable
    with _lock:
        _depth -= 1
        if _depth == 0 and isinstance(var._execution_engine, _EngineProxy):
            var._execution_engine = var._execution_engine._real
