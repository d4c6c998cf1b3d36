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

What ``node_meta`` says of the saved values is made once per node of an observed
backward, so it is kept cheap: the ``looking()`` flag set once per node (no context
manager), the text fixed by a tensor's shape and dtype made once (``_KINDS``), sizes and
flags repr'd without the tensor checks, and one ATen call for a norm.

Mirrors nothing in the engine: ``SavedVariable::unpack`` (``saved_variable.cpp``) calls
the hook; PyTorch has no event for it.
"""

from __future__ import annotations

import contextlib
import re
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


# --- what node_meta says of a node's saved tensors --------------------------------------
_names: dict[type, list[str]] = {}  # a node class's ``_saved_*`` getters (dir() is slow)
NORM_MAX = 1 << 16  # elements: a norm costs a pass over the tensor, so only small ones


def saved_summaries(fn: Any) -> list[tuple[str, str]]:
    """A node's saved tensors (``_saved_*``; a custom Function's ``saved_tensors``):
    name and a summary (shape, dtype, version, size in bytes, norm of a small one)."""
    return [(k, _summary(v)) for k, v in _saved(fn)]


def saved_lines(fn: Any) -> list[str]:
    """``saved_summaries`` as ``node_meta``'s ``saved`` gives it: ``name: summary``."""
    return [f"{k}: {_summary(v)}" for k, v in _saved(fn)]


def _saved(fn: Any) -> list[tuple[str, Any]]:
    """``fn``'s saved values by name, each read as ``looking()`` reads it (inlined: a
    context manager per node costs as much as the node's summaries)."""
    names = _names.get(type(fn))
    if names is None:
        names = _names[type(fn)] = [a for a in dir(type(fn)) if a.startswith("_saved_")]
    pairs: list[tuple[str, Any]] = []
    tls = _tls
    prev = getattr(tls, "looking", False)
    tls.looking = True  # never run an unpack hook before PyTorch does
    try:
        for a in names:
            try:
                pairs.append((a[7:], getattr(fn, a)))  # 7: len("_saved_")
            except Exception as e:  # noqa: BLE001 - freed, or not unpackable: say so
                pairs.append((a[7:], _Unavailable(e)))
        if not names and hasattr(fn, "saved_tensors"):
            try:
                pairs.extend((f"saved_tensors[{i}]", t) for i, t in enumerate(fn.saved_tensors))
            except Exception as e:  # noqa: BLE001
                pairs.append(("saved_tensors", _Unavailable(e)))
    finally:
        tls.looking = prev
    return pairs


_VERSION = re.compile(r"is at version (?P<now>\d+); expected version (?P<saved>\d+)")


class _Unavailable:
    def __init__(self, e: BaseException) -> None:
        if isinstance(e, NotReadYet):
            self.text = "(saved-tensor hooks: read when the node runs)"
            return
        m = _VERSION.search(str(e))
        if m is not None:  # SavedVariable::unpack's version check
            self.text = (f"(modified in place: saved at version {m['saved']}, now version "
                         f"{m['now']}; the backward will fail here)")
            return
        self.text = f"(unavailable: {str(e).splitlines()[0][:80] if str(e) else type(e).__name__})"


def nbytes(n: int) -> str:
    """``48 B``, ``1.5 KiB``, ``3 MiB``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.3g} {unit}"
        size /= 1024
    return f"{n} B"


#: (shape, dtype) -> a saved tensor's summary text fixed by them: ``Tensor[2, 3] float32``,
#: ``, 24 B``, and whether it gets a norm (a small floating tensor)
_KINDS: dict[tuple[Any, Any], tuple[str, str, bool]] = {}


#: the types of most saved values that are not tensors (sizes, dims, flags; a tuple or
#: list that starts with one is no list of tensors): their repr
_PLAIN = frozenset({int, float, bool, type(None), str})


def _summary(v: Any) -> str:
    cls = type(v)
    if cls in _PLAIN or ((cls is tuple or cls is list) and (not v or type(v[0]) in _PLAIN)):
        text = repr(v)
        return text if len(text) <= 60 else text[:57] + "..."
    torch = torch_module()
    if isinstance(v, torch.Tensor):
        return _tensor_summary(v, torch)
    if isinstance(v, _Unavailable):
        return v.text
    if (isinstance(v, (tuple, list)) and v and isinstance(v[0], torch.Tensor)
            and all(isinstance(t, torch.Tensor) for t in v)):
        return f"{len(v)} tensors: " + ", ".join(_summary(t) for t in v[:3]) + (
            ", ..." if len(v) > 3 else "")
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _storage_holds(v: Any) -> bool:
    """Whether ``v``'s storage holds every element of the view: FSDP2's
    ``fully_shard`` resizes an unsharded parameter's storage to 0 bytes after the forward
    and refills it in a pre-backward hook, so a saved view of it (``AddmmBackward0``'s
    ``mat2``) read before its node runs would read freed memory (a crash, not an error)."""
    try:
        last = v.storage_offset() + sum((n - 1) * s for n, s in zip(v.shape, v.stride()))
        return v.untyped_storage().nbytes() >= (last + 1) * v.element_size()
    except Exception:  # noqa: BLE001 - no storage to ask (a subclass): do not read it
        return False


def _tensor_summary(v: Any, torch: Any) -> str:
    """``Tensor[2, 3] float32, version 0, 24 B, |x|=1.234``: the parts fixed by shape and
    dtype made once (``_KINDS``), the norm in one ATen call (float64, as ``.4g``)."""
    key = (v.shape, v.dtype)
    kind = _KINDS.get(key)
    if kind is None:
        if len(_KINDS) >= 4096:  # a run of ever new shapes: start over rather than grow
            _KINDS.clear()
        n = v.numel()
        kind = _KINDS[key] = (
            f"Tensor{list(v.shape)} {str(v.dtype).replace('torch.', '')}",
            f", {nbytes(n * v.element_size())}",
            0 < n <= NORM_MAX and (v.is_floating_point() or v.is_complex()))
    head, size, small_float = kind
    try:
        version = f", version {v._version}"
    except Exception:  # noqa: BLE001 - a tensor without a version counter
        version = ""
    if v.layout != torch.strided or v.is_nested:
        return f"{head} {v.layout}{version}"
    if small_float and v.is_cpu:
        if not _storage_holds(v):  # FSDP2 frees a parameter's storage after the forward
            return f"{head}{version}{size}, (storage freed: refilled when the node runs)"
        wide = torch.complex128 if v.is_complex() else torch.float64  # a real norm either way
        norm = float(torch.linalg.vector_norm(v.detach(), dtype=wide))
        return f"{head}{version}{size}, |x|={norm:.4g}"
    return head + version + size
