"""The modules of a nested graph's nodes: the forward a backward runs (not in PyTorch).

A reentrant checkpoint's ``CheckpointFunction.backward`` (``torch/utils/checkpoint.py``),
or a reversible block's backward (Reformer's), calls the program's modules again during
the backward and differentiates the graph it has just made: a nested ``GraphTask``.
``capture()`` saw the forward pass only, so those nodes had no module, while the outer
graph's nodes had theirs.  While a bridged backward runs (``bridge.reentrant_calls``),
global module forward hooks note each module call made with grad on: its sequence
numbers (``_get_sequence_nr()``, the calling thread's counter, as a node's is) from
entry to exit, and, at exit, the nodes of that range reachable from its output are the
module's (the innermost call's: its hook runs first).  ``Registry.meta`` reads them.
Paths are the forward's (``Registry.module_path``), so the module tree has one entry per
module whichever pass made the node.

The claims hold the nodes (a C++ node takes no weak reference), and so the recomputed
forward's saved tensors, which our engine cannot release (``TorchNode.release_variables``).
PyTorch drops that graph when its nested backward returns, and a checkpointed model keeps
one block's activations at a time: so does the bridge, ``graph_done`` dropping the claims
when a nested backward that does not retain its graph ends (its nodes' ``node_meta``, read
as the backward began, keeps their modules for the views).
"""

from __future__ import annotations

import threading
from typing import Any

from .capture import current_registry

_lock = threading.Lock()
_depth = 0
_handles: list[Any] = []
_local = threading.local()  # .stack: the module calls entered on this thread


def install() -> None:
    """Note the module calls of the backward from now on (counted: nested backwards)."""
    global _depth
    from torch.nn.modules import module as M

    with _lock:
        _depth += 1
        if _depth == 1:
            _handles[:] = [M.register_module_forward_pre_hook(_pre),
                           M.register_module_forward_hook(_post)]


def uninstall() -> None:
    global _depth
    with _lock:
        _depth -= 1
        if _depth == 0:
            for h in _handles:
                h.remove()
            _handles.clear()


def graph_done(retain_graph: bool) -> None:
    """A nested backward has ended: the graph a recompute made is PyTorch's to free, unless
    the backward retains it (another backward may run it: its nodes keep their claims)."""
    if not retain_graph:
        current_registry().forget_recomputed()


def _stack() -> list[tuple[str, str, int, set[int]]]:
    st = getattr(_local, "stack", None)
    if st is None:
        st = _local.stack = []
    return st


def _nodes(x: Any) -> list[Any]:
    """The ``grad_fn`` of each tensor in ``x`` (a tensor, or a tuple, list, dict of them)."""
    import torch

    if isinstance(x, torch.Tensor):
        return [x.grad_fn] if x.grad_fn is not None else []
    if isinstance(x, (list, tuple)):
        return [n for v in x for n in _nodes(v)]
    if isinstance(x, dict):
        return [n for v in x.values() for n in _nodes(v)]
    return []


def _pre(module: Any, args: Any) -> None:
    import torch

    st = _stack()
    reg = current_registry()
    path = reg.module_path(module)
    if path is None:  # not called in the forward pass: below its caller, by type
        path = reg.module_below(st[-1][0] if st else "", type(module).__name__)
    # the nodes of its inputs were made before it: a walk from its output stops there
    st.append((path, type(module).__name__, torch._C._autograd._get_sequence_nr(),
               {id(n) for n in _nodes(args)}))


def _post(module: Any, args: Any, output: Any) -> None:
    import torch

    st = _stack()
    if not st:  # installed while this call ran: its entry was not seen
        return
    path, typ, start, before = st.pop()
    end = torch._C._autograd._get_sequence_nr()
    if end > start:  # it made nodes
        current_registry().claim(_nodes(output), start, end, (path, typ), before)
