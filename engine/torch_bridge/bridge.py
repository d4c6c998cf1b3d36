"""``from_torch``: a real PyTorch backward graph, scheduled by our engine.

Mirrors what PyTorch's engine does around a node (``call_function`` in
``engine.cpp``: tensor pre-hooks, retains_grad hooks, pre-hooks, the node,
post-hooks) by handing our engine one ``TorchNode`` per PyTorch node: our
engine schedules (``compute_dependencies``, the ReadyQueue, ``not_ready``,
``InputBuffer``) and PyTorch computes (each ``apply`` calls the real node; an
``AccumulateGrad`` writes the real ``.grad``).  Names, sequence numbers
(``_sequence_nr()``; AccumulateGrad's is UINT64_MAX in both), input metadata
and devices are PyTorch's, so the order is PyTorch's.

Departures, and why:
- Gradients travel between nodes as NumPy arrays (our ``Tensor``), so every view
  summarises them as it does ours; a node gets them back as ``torch.from_numpy``
  (moved to its device).  An ``AccumulateGrad`` gets a copy: PyTorch may steal
  its input into ``.grad`` and add to it in place later, and our buffers may
  share that array.
- A C++ node's ``release_variables`` is not reachable from Python: saved tensors
  are kept after the node runs (a second backward succeeds where PyTorch's fails).
- Hooks PyTorch keeps in C++ are found through Python: a node's pre- and
  post-hook dicts by registering (and removing) a probe hook, a leaf's tensor
  hooks in ``variable._backward_hooks``; a non-leaf tensor's hooks and
  ``retain_grad`` only when they were registered under ``torch_capture.capture()``
  (``autograd-tui torch`` runs the forward pass under it).
- A custom ``Function``'s node (a Python ``BackwardCFunction``) is not callable:
  ``PyNode::apply`` is re-done here (zeros for undefined gradients when
  ``materialize_grads``, the count check, dropping non-tensor inputs' gradients).
- ``torch.autograd.backward``/``grad`` called inside a node (a reentrant
  checkpoint) run on our engine, as a reentrant backward, while a bridged
  backward runs on that thread.

torch is imported lazily: ``import autograd_tui`` never needs it.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import grad_mode
from ..graph import UINT64_MAX, AccumulateGrad, Edge, Identity, Node
from ..tensor import Tensor


class TorchBridgeError(RuntimeError):
    """A PyTorch graph the bridge cannot run: the message names the node."""


def torch_module() -> Any:
    """``import torch``, or a clear message saying how to install it."""
    try:
        import torch
    except ImportError:
        raise TorchBridgeError(
            "PyTorch is not installed: pip install 'autograd-tui[torch]' (or pip install torch)"
        ) from None
    return torch


def node_label(fn: Any) -> str:
    try:
        return f"{type(fn).__name__} (sequence_nr {fn._sequence_nr()})"
    except Exception:  # noqa: BLE001 - a label must not fail
        return type(fn).__name__


# --- conversions ---------------------------------------------------------------------------
def _numpy_dtype(torch: Any, dtype: Any, fn: Any) -> np.dtype:
    try:
        return torch.empty((), dtype=dtype).numpy().dtype
    except TypeError:
        raise TorchBridgeError(f"{node_label(fn)}: its gradients are {dtype}, which NumPy "
                               "cannot hold; the bridge supports float16/32/64 and "
                               "complex") from None


def _device_str(dev: Any) -> str:
    s = str(dev)
    return "cuda:0" if s == "cuda" else s


def _check_device(dev: Any, fn: Any) -> str:
    """Our engine has cpu and cuda:N queues; a CUDA graph needs a GPU to compute on."""
    s = _device_str(dev)
    if s.startswith("cuda:"):
        if not _torch().cuda.is_available():
            raise TorchBridgeError(f"{node_label(fn)} runs on {s}, but PyTorch finds no GPU "
                                   "here: run the script where it has one")
    elif s != "cpu":
        raise TorchBridgeError(f"{node_label(fn)} runs on device {s}: the bridge runs cpu "
                               "and cuda graphs only")
    return s


def to_ours(t: Any, fn: Any) -> Tensor | None:
    """A PyTorch gradient as our Tensor (NumPy data, the same device name)."""
    if t is None:
        return None
    if t.is_sparse or t.layout != _torch().strided:
        raise TorchBridgeError(f"{node_label(fn)} produced a {t.layout} gradient: the bridge "
                               "handles dense (strided) tensors only")
    if t.is_nested:
        raise TorchBridgeError(f"{node_label(fn)} produced a nested tensor: the bridge "
                               "handles dense tensors only")
    data = t.detach()
    if data.device.type != "cpu":
        data = data.cpu()
    try:
        arr = data.resolve_conj().resolve_neg().numpy()
    except TypeError:
        raise TorchBridgeError(f"{node_label(fn)} produced a {t.dtype} gradient, which NumPy "
                               "cannot hold") from None
    return Tensor(arr, device=_device_str(t.device))


def to_torch(t: Tensor | None, copy: bool = False) -> Any:
    if t is None:
        return None
    torch = _torch()
    arr = np.asarray(t.data)
    out = torch.from_numpy(np.array(arr, copy=True) if copy or not arr.flags.writeable
                           else arr)
    return out if t.device == "cpu" else out.to(t.device)


def _torch() -> Any:
    import torch

    return torch


def input_metadata(fn: Any) -> list[tuple[tuple[int, ...], np.dtype, str]]:
    """``fn``'s input metadata as ours (shape, NumPy dtype, device), or a clear error."""
    torch = _torch()
    out = []
    for m in fn._input_metadata:
        if m.is_nested_tensor or m.is_cpp_nested_tensor:
            raise TorchBridgeError(f"{node_label(fn)} takes a nested tensor: the bridge "
                                   "handles dense tensors only")
        out.append((tuple(m.shape), _numpy_dtype(torch, m.dtype, fn),
                    _check_device(m.device, fn)))
    return out


# --- nodes ----------------------------------------------------------------------------------
_local = threading.local()  # .active: a bridged backward runs on this thread


class TorchNode(Node):
    """One PyTorch node: our engine schedules it, ``apply`` calls the real one."""

    def __init__(self, fn: Any, is_var_input: tuple[bool, ...] | None = None) -> None:
        super().__init__(sequence_nr=int(fn._sequence_nr()))
        self.fn = fn
        self._name = type(fn).__name__
        self._is_var_input = is_var_input
        self.meta: dict[str, Any] | None = None  # node_meta (torch_capture)
        torch = _torch()
        self._python = isinstance(fn, torch.autograd.function.BackwardCFunction)
        if not (self._python or callable(fn)):
            raise TorchBridgeError(f"{node_label(fn)} cannot be called from Python, so the "
                                   "bridge cannot run it")
        for m in input_metadata(fn):
            self.add_input_metadata(*m)

    def name(self) -> str:
        return self._name

    def node_meta(self) -> dict[str, Any] | None:
        return self.meta

    def saved_tensor_summaries(self) -> dict[str, str]:
        from .capture import saved_summaries

        return dict(saved_summaries(self.fn))

    def release_variables(self) -> None:
        pass  # not reachable from Python for C++ nodes (see the module docstring)

    def apply(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        torch = _torch()
        args = [to_torch(g) for g in grads]
        with torch.set_grad_enabled(grad_mode.is_grad_enabled()):
            if self._python:
                outs = self._apply_python(torch, args)
            else:
                outs = self.fn(*args)
        if isinstance(outs, torch.Tensor) or outs is None:
            outs = (outs,)
        return [to_ours(o, self.fn) for o in outs]

    def _apply_python(self, torch: Any, args: list[Any]) -> Sequence[Any]:
        """``PyNode::apply`` (python_function.cpp): a custom Function's backward."""
        fn = self.fn
        if getattr(fn, "materialize_grads", True):
            for i, a in enumerate(args):
                if a is None:
                    m = fn._input_metadata[i]
                    args[i] = torch.zeros(tuple(m.shape), dtype=m.dtype, device=m.device)
        r = fn.apply(*args)
        outs = tuple(r) if isinstance(r, (tuple, list)) else (r,)
        n_next = len(self._next_edges)
        is_var = self._is_var_input
        if is_var is None:  # not captured: guess from needs_input_grad
            needs = tuple(getattr(fn, "needs_input_grad", ()))
            if len(outs) == n_next:
                is_var = (True,) * n_next
            elif len(needs) == len(outs) and sum(needs) == n_next:
                is_var = needs
            else:
                is_var = (True,) * n_next
        n_fwd = len(is_var)
        if len(outs) > n_fwd and all(o is None for o in outs[n_fwd:]):
            outs = outs[:n_fwd]  # too many results is fine, if they are all None
        if len(outs) != n_fwd:
            raise RuntimeError(f"function {self._name} returned an incorrect number of "
                               f"gradients (expected {n_fwd}, got {len(outs)})")
        return [o for o, v in zip(outs, is_var) if v]


class TorchAccumulateGrad(AccumulateGrad):
    """PyTorch's ``AccumulateGrad``: the real node writes the real ``.grad``.

    ``variable`` is a view for the engine and the events: ``_grad`` as NumPy, and the
    leaf's tensor hooks (``x.register_hook``) as hooks on our Tensors."""

    def __init__(self, fn: Any) -> None:
        Node.__init__(self, sequence_nr=UINT64_MAX)
        self.fn = fn
        from .hooks import LeafView

        self.variable = LeafView(fn)  # type: ignore[assignment]
        self.meta: dict[str, Any] | None = None
        self.add_input_metadata(*input_metadata(fn)[0])
        self._lock = threading.Lock()

    def name(self) -> str:
        return "AccumulateGrad"

    def node_meta(self) -> dict[str, Any] | None:
        return self.meta

    def saved_tensor_summaries(self) -> dict[str, str]:
        return {}

    def apply(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        if grads[0] is None:
            return []
        torch = _torch()
        with torch.set_grad_enabled(grad_mode.is_grad_enabled()):
            self.fn(to_torch(grads[0], copy=True))
        return []


# --- the graph --------------------------------------------------------------------------------
class TorchGraph:
    """What ``from_torch`` returns: roots, root gradients and output edges for
    ``Engine.execute``; ``nodes`` maps each PyTorch node to ours."""

    def __init__(self, roots: list[Edge], grads: list[Tensor | None], outputs: list[Edge],
                 nodes: dict[int, Node], torch_nodes: dict[int, Any],
                 retain: list[Any]) -> None:
        self.roots, self.grads, self.outputs = roots, grads, outputs
        self.nodes, self.torch_nodes = nodes, torch_nodes
        self._retain = retain  # non-leaf inputs= tensors: retain_grad, as backward() does

    def node(self, fn: Any) -> Node:
        return self.nodes[id(fn)]

    def backward(self, retain_graph: bool = False) -> None:
        """``torch.autograd.backward`` on our engine (the calling thread's engine)."""
        from ..engine import get_default_engine
        from .hooks import reentrant_calls

        for t in self._retain:
            t.retain_grad()  # as backward() does: reading .grad then gives no warning
        prev = getattr(_local, "active", False)
        _local.active = True
        try:
            with reentrant_calls():
                get_default_engine().execute(self.roots, self.grads, retain_graph, False,
                                             True, self.outputs)
        finally:
            _local.active = prev


def _tensors(x: Any) -> list[Any]:
    torch = _torch()
    if x is None:
        return []
    if isinstance(x, torch.Tensor):
        return [x]
    return list(x)


def from_torch(outputs: Any, grad_outputs: Any = None, inputs: Any = None) -> TorchGraph:
    """Walk PyTorch's graph from ``outputs`` (a tensor or a sequence of them) through
    ``grad_fn.next_functions`` and build ours; ``grad_outputs`` as in
    ``torch.autograd.backward`` (default: ones for scalar outputs), ``inputs`` as its
    ``inputs=`` (gradients only for those)."""
    torch = torch_module()
    from .capture import current_registry

    reg = current_registry()
    outs = _tensors(outputs)
    if not outs:
        raise TorchBridgeError("from_torch: no output tensors")
    gouts = _tensors(grad_outputs) if grad_outputs is not None else [None] * len(outs)
    if len(gouts) != len(outs):
        raise TorchBridgeError(f"from_torch: {len(outs)} outputs but {len(gouts)} "
                               "grad_outputs")
    root_fns = []
    for i, t in enumerate(outs):
        if not isinstance(t, torch.Tensor):
            raise TorchBridgeError(f"from_torch: output {i} is a {type(t).__name__}, not a "
                                   "torch.Tensor")
        if not t.requires_grad:
            raise TorchBridgeError(f"from_torch: output {i} does not require grad and has no "
                                   "grad_fn: nothing to differentiate")
        root_fns.append(torch.autograd.graph.get_gradient_edge(t))

    # Every node reachable, children before parents (an edge sets topological_nr from
    # its child's, as in PyTorch).
    order: list[Any] = []
    seen: dict[int, Any] = {}
    stack: list[tuple[Any, bool]] = [(e.node, False) for e in reversed(root_fns)]
    while stack:
        fn, done = stack.pop()
        if done:
            order.append(fn)
            continue
        if id(fn) in seen:
            continue
        seen[id(fn)] = fn
        stack.append((fn, True))
        for nxt, _ in fn.next_functions:
            if nxt is not None and id(nxt) not in seen:
                stack.append((nxt, False))
    from .hooks import RetainGrad, install_hooks

    nodes: dict[int, Node] = {}
    for fn in order:
        ours = (TorchAccumulateGrad(fn) if type(fn).__name__ == "AccumulateGrad"
                and hasattr(fn, "variable") else TorchNode(fn, reg.var_inputs(fn)))
        ours.set_next_edges([Edge(nodes[id(n)], nr) if n is not None else Edge(None, 0)
                             for n, nr in fn.next_functions])
        install_hooks(ours, fn, reg)
        ours.meta = reg.meta(fn)
        nodes[id(fn)] = ours

    grads: list[Tensor | None] = []
    for i, (t, g) in enumerate(zip(outs, gouts)):
        if g is None:
            if t.numel() != 1:
                raise TorchBridgeError("grad can be implicitly created only for scalar "
                                       f"outputs (output {i} has shape {list(t.shape)})")
            g = torch.ones_like(t)
        grads.append(to_ours(g, root_fns[i].node))
    roots = [Edge(nodes[id(e.node)], e.output_nr) for e in root_fns]

    out_edges: list[Edge] = []
    retain: list[Any] = []
    for t in _tensors(inputs):
        e = torch.autograd.graph.get_gradient_edge(t)
        n = nodes.get(id(e.node))
        out_edges.append(Edge(n, e.output_nr) if n is not None else Edge(Identity(), 0))
        if t.grad_fn is not None:  # backward(inputs=) retains a non-leaf's grad
            retain.append(t)
            if n is not None:
                n._retains_grad_hooks[e.output_nr] = RetainGrad(weakref.ref(t))
    return TorchGraph(roots, grads, out_edges, nodes, dict(seen), retain)


def is_active() -> bool:
    """A bridged backward runs on this thread (a reentrant call goes to our engine)."""
    return getattr(_local, "active", False)
