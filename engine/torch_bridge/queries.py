"""PyTorch's graph-task queries, answered by our engine while it runs a bridged backward.

PyTorch's Python code asks its engine about the backward that is running:
``torch._C._current_graph_task_id()`` (``torch.utils.checkpoint`` without reentrancy
keys its recomputation by it; ``register_multi_grad_hook`` counts calls by it),
``torch._C._will_engine_execute_node(grad_fn)``, ``torch._C._current_autograd_node()``
and ``torch._C._autograd._get_current_graph_task_keep_graph()``.  PyTorch answers from
the thread-local ``current_graph_task`` and ``current_evaluating_node`` that
``thread_main`` sets (``GraphTaskGuard``, ``NodeGuard``); our engine sets the same
thread-locals (``graph_task.get_current_graph_task``/``get_current_node``), so while a
bridged backward runs (``install``/``uninstall``, counted, under a lock) these four
functions of ``torch._C`` are replaced by functions that read them.

Mirrors: ``get_current_graph_task_id``, ``get_current_graph_task_keep_graph``,
``get_current_graph_task_nodes_in_graph``/``_exec_info`` (``engine.cpp``),
``THPModule_willEngineExecuteNode`` (``Module.cpp``),
``THPModule_current_autograd_node`` (``python_engine.cpp``).

Departures, and why:
- A GraphTask of ours answers with its own number offset by 2**52: PyTorch's ids and
  ours share one process (``check-order`` runs both engines on one forward pass), and a
  checkpoint frame keyed by one id must never see the other engine's run as its own.
- When PyTorch's own engine runs on the thread (a ``create_graph`` backward inside a
  node stays PyTorch's) its answers win: it is the innermost backward.
- ``torch._C._current_graph_task_execution_order`` (compiled autograd only) is left as
  PyTorch's.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any

from ..graph_task import GraphTask, get_current_graph_task, get_current_node
from .convert import torch_module

_lock = threading.Lock()
_depth = 0
_saved: dict[str, Any] = {}
_OFFSET = 1 << 52
_ids = itertools.count(_OFFSET + 1)
_task_ids: weakref.WeakKeyDictionary[GraphTask, int] = weakref.WeakKeyDictionary()
_node_maps: weakref.WeakKeyDictionary[GraphTask, dict[int, tuple[Any, Any]]] = \
    weakref.WeakKeyDictionary()

_NAMES = (("_C", "_current_graph_task_id"), ("_C", "_will_engine_execute_node"),
          ("_C", "_current_autograd_node"),
          ("_C._autograd", "_get_current_graph_task_keep_graph"))


def task_id(gt: GraphTask) -> int:
    """The id PyTorch's queries give for our GraphTask (unique in the process)."""
    with _lock:
        i = _task_ids.get(gt)
        if i is None:
            i = _task_ids[gt] = next(_ids)
        return i


def _ours() -> GraphTask | None:
    """Our GraphTask on this thread, unless PyTorch's own engine runs inside it."""
    gt = get_current_graph_task()
    if gt is None or _saved["_current_graph_task_id"]() != -1:
        return None
    return gt


def current_graph_task_id() -> int:
    gt = _ours()
    return _saved["_current_graph_task_id"]() if gt is None else task_id(gt)


def current_autograd_node() -> Any:
    gt = _ours()
    if gt is None:
        return _saved["_current_autograd_node"]()
    return getattr(get_current_node(), "fn", None)  # a TorchNode's PyTorch node


def get_current_graph_task_keep_graph() -> bool:
    gt = _ours()
    if gt is None:
        return bool(_saved["_get_current_graph_task_keep_graph"]())
    return bool(gt.keep_graph)


def _node_of(gt: GraphTask, fn: Any) -> Any:
    with _lock:
        m = _node_maps.get(gt)
        if m is None:
            m = _node_maps[gt] = {id(n.fn): (n.fn, n) for n in list(gt.nodes_in_graph)
                                  if hasattr(n, "fn")}
    hit = m.get(id(fn))
    return hit[1] if hit is not None and hit[0] is fn else None


def will_engine_execute_node(node: Any) -> bool:
    gt = _ours()
    if gt is None:
        return bool(_saved["_will_engine_execute_node"](node))
    torch = torch_module()
    if not isinstance(node, torch.autograd.graph.Node):
        raise TypeError(f"_will_engine_execute_node expects an grad_fn, but got "
                        f"{type(node).__name__}")
    ours = _node_of(gt, node)
    ret = ours is not None and ours in gt.nodes_in_graph
    if ret and gt.exec_info:
        info = gt.exec_info.get(ours)
        if info is None or not info.should_execute():
            ret = False
        elif ours._topological_nr == 0 and info.captures:
            raise RuntimeError("A leaf node was passed to _will_engine_execute_node but we "
                               "are currently running autograd.grad(). This is currently not "
                               "supported.")
    return ret


_OURS = {"_current_graph_task_id": current_graph_task_id,
         "_will_engine_execute_node": will_engine_execute_node,
         "_current_autograd_node": current_autograd_node,
         "_get_current_graph_task_keep_graph": get_current_graph_task_keep_graph}


def _module(torch: Any, path: str) -> Any:
    m = torch
    for part in path.split("."):
        m = getattr(m, part)
    return m


def install() -> None:
    """Answer PyTorch's queries from our engine (counted: the last ``uninstall`` restores)."""
    global _depth
    torch = torch_module()
    with _lock:
        _depth += 1
        if _depth == 1:
            for path, name in _NAMES:
                mod = _module(torch, path)
                if getattr(mod, name) is not _OURS[name]:
                    _saved[name] = getattr(mod, name)  # kept: a late caller still finds it
                setattr(mod, name, _OURS[name])


def uninstall() -> None:
    global _depth
    torch = torch_module()
    with _lock:
        _depth -= 1
        if _depth == 0:
            for path, name in _NAMES:
                setattr(_module(torch, path), name, _saved[name])
