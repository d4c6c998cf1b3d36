"""Saved tensors read when PyTorch reads them, and a checkpoint's recompute as events.

A tensor saved under saved-tensor hooks (``torch.autograd.graph.saved_tensors_hooks``:
``torch.utils.checkpoint(..., use_reentrant=False)``, ``save_on_cpu``) runs its unpack
hook each time it is read, and a non-reentrant checkpoint's first unpack in a backward
re-runs the checkpointed forward.  So the bridge must not read such a tensor before
PyTorch does: ``install()`` (counted; around the forward pass under ``capture()`` and
around a bridged backward) makes ``saved_tensors_hooks.__enter__`` push a guarded unpack
hook, which refuses to run while the bridge only looks (``looking()``, around the
``node_meta`` summaries: such a tensor is summarised as not read) and, inside a node our
engine runs, adds a ``hook`` event (``hook_kind`` ``unpack``) after each unpack.  Entering
checkpoint's ``_recomputation_hook`` (the recompute starting) adds a ``hook`` event with
``hook_kind`` ``recompute`` on the node whose read started it.

Mirrors nothing in the engine: ``SavedVariable::unpack`` (``saved_variable.cpp``) calls
the hook; PyTorch has no event for it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ..graph_task import get_current_graph_task, get_current_node
from .convert import torch_module

_tls = threading.local()  # .looking: the bridge reads saved tensors for a summary
_lock = threading.Lock()
_depth = 0
_orig: dict[str, Any] = {}

RECOMPUTE_NAME = "torch.utils.checkpoint re-runs the forward (use_reentrant=False)"


class NotReadYet(RuntimeError):
    """Raised by a guarded unpack hook while the bridge only looks."""


@contextlib.contextmanager
def looking() -> Iterator[None]:
    """Reads of saved tensors under hooks fail with ``NotReadYet`` (no hook runs)."""
    prev = getattr(_tls, "looking", False)
    _tls.looking = True
    try:
        yield
    finally:
        _tls.looking = prev


def emit(hook_kind: str, name: str) -> None:
    """A ``hook`` event on the node this thread's engine is evaluating, if any."""
    gt, node = get_current_graph_task(), get_current_node()
    eng = getattr(gt, "engine", None)
    if gt is None or node is None or eng is None or not eng._observers:
        return
    eng._emit("hook", gt, node, None, hook_kind=hook_kind, modified=False, name=name)


def guard(unpack: Callable[[Any], Any]) -> Callable[[Any], Any]:
    if getattr(unpack, "_bridge_guarded", False):
        return unpack
    name = getattr(unpack, "__name__", type(unpack).__name__)

    def guarded(packed: Any) -> Any:
        if getattr(_tls, "looking", False):
            raise NotReadYet("saved under saved-tensor hooks: read when the node runs")
        out = unpack(packed)
        emit("unpack", name)
        return out

    guarded._bridge_guarded = True  # type: ignore[attr-defined]
    guarded.__wrapped__ = unpack  # type: ignore[attr-defined]
    guarded.__name__ = name
    return guarded


def _enter(self: Any) -> Any:
    self.unpack_hook = guard(self.unpack_hook)
    if type(self).__name__ == "_recomputation_hook":
        emit("recompute", RECOMPUTE_NAME)
    return _orig["enter"](self)


def install() -> None:
    """Guard the unpack hooks that ``saved_tensors_hooks`` pushes (counted)."""
    global _depth
    cls = torch_module().autograd.graph.saved_tensors_hooks
    with _lock:
        _depth += 1
        if _depth == 1:
            if cls.__dict__["__enter__"] is not _enter:
                _orig["enter"] = cls.__dict__["__enter__"]
            cls.__enter__ = _enter


def uninstall() -> None:
    global _depth
    cls = torch_module().autograd.graph.saved_tensors_hooks
    with _lock:
        _depth -= 1
        if _depth == 0:
            cls.__enter__ = _orig["enter"]


@contextlib.contextmanager
def installed() -> Iterator[None]:
    install()
    try:
        yield
    finally:
        uninstall()
