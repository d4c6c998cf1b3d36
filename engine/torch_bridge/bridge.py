"""The top of the bridge: PyTorch's nodes wrapped as ours, ``from_torch``, and the
reentrant entry points.

``TorchNode``/``TorchAccumulateGrad`` are what our engine schedules (``apply``
calls the real node); ``from_torch`` walks PyTorch's graph and builds ours, with
the hooks (``hooks``) and the facts of the forward pass (``capture``);
``TorchGraph.backward`` runs it on our engine, during which
``torch.autograd.backward``/``grad`` called inside a node go to our engine too
(``reentrant_calls``).  What each part mirrors and departs from: the package's
docstring.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from .. import grad_mode
from ..engine import get_default_engine
from ..grad_mode import _tls as grad_tls
from ..graph import UINT64_MAX, AccumulateGrad, Edge, Identity, Node
from ..graph_task import get_current_graph_task
from ..tensor import Tensor
from . import ddp, queries, recompute, saved
from .capture import current_registry, saved_summaries
from .convert import (
    TorchBridgeError,
    TorchGrad,
    check_backward_args,
    node_label,
    node_metadata,
    outputs_to_ours,
    to_ours,
    to_torch,
    torch_module,
    traced,
    typename,
)
from .hooks import LeafView, RetainGrad, accumulate, install_hooks, probing
from .sites import install_warnings, uninstall_warnings

# --- nodes ----------------------------------------------------------------------------------
_local = threading.local()  # .active: a bridged backward runs on this thread


class LazyMeta:
    """``meta`` (the ``node_meta`` fields) made from the registry when first read (an
    observed backward's ``dependencies_computed``, a leaf's name): a backward nobody
    watches never pays for the summaries."""

    fn: Any
    _meta: dict[str, Any] | None = None
    _registry: Any = None  # capture.Registry, until meta is made

    @property
    def meta(self) -> dict[str, Any] | None:
        if self._meta is None and self._registry is not None:
            self._meta, self._registry = self._registry.meta(self.fn), None
        return self._meta

    @meta.setter
    def meta(self, value: dict[str, Any] | None) -> None:
        self._meta, self._registry = value, None


class TorchNode(LazyMeta, Node):
    """One PyTorch node: our engine schedules it, ``apply`` calls the real one."""

    def __init__(self, fn: Any, is_var_input: tuple[bool, ...] | None = None) -> None:
        super().__init__(sequence_nr=int(fn._sequence_nr()))
        self.fn = fn
        self._name = type(fn).__name__
        self._is_var_input = is_var_input
        self.meta: dict[str, Any] | None = None  # node_meta (capture.Registry.meta)
        self._targets: list[Any] | None = None
        torch = torch_module()
        self._python = isinstance(fn, torch.autograd.function.BackwardCFunction)
        if not (self._python or callable(fn)):
            raise TorchBridgeError(f"{node_label(fn)} cannot be called from Python, so the "
                                   "bridge cannot run it")
        ours, self.torch_meta = node_metadata(fn)  # torch_meta: PyTorch's (shape, dtype)
        for m in ours:
            self.add_input_metadata(*m)
        if torch.is_anomaly_enabled():  # the forward's stack, for print_stack on an error
            stack = getattr(fn, "metadata", {}).get("traceback_")
            if stack is not None:
                self.metadata["traceback_"] = "".join(stack)

    def name(self) -> str:
        return self._name

    def node_meta(self) -> dict[str, Any] | None:
        return self.meta

    def saved_tensor_summaries(self) -> dict[str, str]:
        return dict(saved_summaries(self.fn))

    def release_variables(self) -> None:
        pass  # not reachable from Python for C++ nodes (see the package's docstring)

    def apply(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        torch = torch_module()
        # A PyTorch node's gradient is passed on as the torch tensor it is (to_torch).
        args = [g.held if type(g) is TorchGrad else to_torch(g) for g in grads]
        want = getattr(grad_tls, "enabled", True)  # grad_mode.is_grad_enabled(), inlined
        tc = torch._C
        prev = tc.is_grad_enabled()
        if prev != want:  # set_grad_enabled, without a context manager's cost per node
            tc._set_grad_enabled(want)
        try:
            if self._python:
                outs = self._apply_python(torch, args)
            else:
                outs = self.fn(*args)
        finally:
            if prev != want:
                tc._set_grad_enabled(prev)
        if isinstance(outs, torch.Tensor) or outs is None:
            outs = (outs,)
        if self._targets is None:  # where each output goes: validate_outputs in torch
            # (PyTorch's shape and dtype of the next node's input; None: not PyTorch's)
            self._targets = [m[e.input_nr] if (m := getattr(e.function, "torch_meta", None))
                             is not None else None for e in self._next_edges]
        return outputs_to_ours(outs, self._targets, self.fn)

    def _apply_python(self, torch: Any, args: list[Any]) -> Sequence[Any]:
        """``PyNode::apply`` (python_function.cpp): a custom Function's backward."""
        fn = self.fn
        if getattr(fn, "materialize_grads", True):
            for i, a in enumerate(args):
                if a is None:
                    m = fn._input_metadata[i]
                    args[i] = torch.zeros(tuple(m.shape), dtype=m.dtype, device=m.device)
        r = fn.apply(*args)
        outs = r if isinstance(r, tuple) else (r,)  # ensure_tuple: a list is one result
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
        res = []
        for i, (o, v) in enumerate(zip(outs, is_var)):
            if not v:
                if o is not None:
                    raise RuntimeError(f"function {self._name} returned a gradient different "
                                       f"than None at position {i + 1}, but the corresponding "
                                       "forward input was not a Variable")
            elif o is None or isinstance(o, torch.Tensor):
                res.append(o)
            else:
                raise RuntimeError(f"expected Variable or None (got {typename(o)})")
        return res


class TorchAccumulateGrad(LazyMeta, AccumulateGrad):
    """PyTorch's ``AccumulateGrad``: the real node writes the real ``.grad``.

    ``variable`` is a view for the engine and the events: ``_grad`` as NumPy, and the
    leaf's tensor hooks (``x.register_hook``) as hooks on our Tensors."""

    def __init__(self, fn: Any) -> None:
        Node.__init__(self, sequence_nr=UINT64_MAX)
        self.fn = fn
        self.variable = LeafView(fn)  # type: ignore[assignment]
        self.meta: dict[str, Any] | None = None
        ours, self.torch_meta = node_metadata(fn)
        self.add_input_metadata(*ours[0])
        self._lock = threading.Lock()
        self.hook_dicts: tuple[dict[Any, Any], ...] = ()  # the Python hooks' (install_hooks)
        self.accumulated = False  # it ran: a .grad still None was cleared by the program
        self.reached = False  # it was called, maybe with no gradient (a None from a node)

    def name(self) -> str:
        return "AccumulateGrad"

    def node_meta(self) -> dict[str, Any] | None:
        return self.meta

    def saved_tensor_summaries(self) -> dict[str, str]:
        return {}

    def apply(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        self.reached = True
        if grads[0] is None:
            return []
        # PyTorch's engine runs the node (call_function: the hooks PyTorch keeps in C++,
        # DDP's reducer among them, fire after it); the Python hooks are ours to run.
        accumulate(self.fn, to_torch(grads[0], copy=True), self.hook_dicts,
                   grad_mode.is_grad_enabled())
        self.accumulated = True
        if ddp.ACTIVE:  # a DDP module's buckets: what the reducer just did
            ddp.after_accumulate(self.fn.variable)
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
        for t in self._retain:
            t.retain_grad()  # as backward() does: reading .grad then gives no warning
        prev = getattr(_local, "active", False)
        _local.active = True
        leaves = {id(n.fn.variable) for n in self.nodes.values()
                  if isinstance(n, TorchAccumulateGrad)} if ddp.watching() else set()
        torch = torch_module()
        # PyTorch's anomaly mode (its NaN check after each node, the forward's stack on an
        # error) is the program's setting, not our engine's own flag
        anomaly = grad_mode.set_detect_anomaly(torch.is_anomaly_enabled(),
                                               torch.is_anomaly_check_nan_enabled())
        try:
            with anomaly, reentrant_calls(), ddp.backward_scope(leaves):
                get_default_engine().execute(self.roots, self.grads, retain_graph, False,
                                             True, self.outputs)
        finally:
            _local.active = prev


def _tensors(x: Any) -> list[Any]:
    torch = torch_module()
    if x is None:
        return []
    if isinstance(x, torch.Tensor):
        return [x]
    return list(x)


@probing()  # each node's hook dicts (install_hooks): one patch for the whole walk
def from_torch(outputs: Any, grad_outputs: Any = None, inputs: Any = None) -> TorchGraph:
    """Walk PyTorch's graph from ``outputs`` (a tensor or a sequence of them) through
    ``grad_fn.next_functions`` and build ours; ``grad_outputs`` as in
    ``torch.autograd.backward`` (default: ones for scalar outputs), ``inputs`` as its
    ``inputs=`` (gradients only for those)."""
    torch = torch_module()
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
            why = ("it was made under torch.inference_mode(), which records no graph: compute "
                   "the loss outside it" if t.is_inference() else
                   "a tensor made under torch.no_grad(), detached, or by forward-mode AD "
                   "alone, torch.autograd.forward_ad or torch.func.jvp, has no backward graph")
            raise TorchBridgeError(f"from_torch: output {i} does not require grad and has no "
                                   f"grad_fn: nothing to differentiate ({why})")
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
    nodes: dict[int, Node] = {}
    for fn in order:
        ours = (TorchAccumulateGrad(fn) if type(fn).__name__ == "AccumulateGrad"
                and hasattr(fn, "variable") else TorchNode(fn, reg.var_inputs(fn)))
        ours.set_next_edges([Edge(nodes[id(n)], nr) if n is not None else Edge(None, 0)
                             for n, nr in fn.next_functions])
        install_hooks(ours, fn, reg)
        ours._registry = reg  # meta made when first read (LazyMeta)
        nodes[id(fn)] = ours

    grads: list[Tensor | None] = []
    for i, (t, g) in enumerate(zip(outs, gouts)):
        if g is None:
            if t.numel() != 1:
                raise TorchBridgeError("grad can be implicitly created only for scalar "
                                       f"outputs (output {i} has shape {list(t.shape)})")
            if not t.dtype.is_floating_point:  # a complex loss: _make_grads refuses it too
                raise TorchBridgeError("grad can be implicitly created only for real scalar "
                                       f"outputs but got {t.dtype}")
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


# --- reentrant calls: backward/grad from inside a bridged node ----------------------------
_lock = threading.Lock()
_reentrant_depth = 0
_patched: dict[str, Any] = {}


@contextlib.contextmanager
def reentrant_calls() -> Iterator[None]:
    """While a bridged backward runs, ``torch.autograd.backward``/``grad`` go to our engine,
    and PyTorch's graph-task queries and saved-tensor unpacks are answered and seen."""
    global _reentrant_depth
    ag = torch_module().autograd
    with _lock:
        _reentrant_depth += 1
        if _reentrant_depth == 1:
            _patched["backward"], _patched["grad"] = ag.backward, ag.grad
            ag.backward, ag.grad = _backward, _grad
    queries.install()  # PyTorch's graph-task queries answer from our engine (queries.py)
    saved.install()  # a checkpoint's recompute and unpacks as events (saved.py)
    recompute.install()  # its modules, for its nodes' node_meta (recompute.py)
    install_warnings()  # shown at PyTorch's line, not ours (sites.py)
    ddp.install()  # _DDPSink's queue_callback onto our GraphTask (ddp.py)
    try:
        yield
    finally:
        ddp.uninstall()
        uninstall_warnings()
        recompute.uninstall()
        saved.uninstall()
        queries.uninstall()
        with _lock:
            _reentrant_depth -= 1
            if _reentrant_depth == 0:  # kept in _patched: a late caller still finds them
                ag.backward, ag.grad = _patched["backward"], _patched["grad"]


def _inside_ours() -> bool:
    """This thread runs a backward of ours (a node, a hook, on any of our threads): a call
    from here is reentrant; another thread's (two threads may backward at once) PyTorch's."""
    return is_active() or get_current_graph_task() is not None


def _backward(tensors: Any, grad_tensors: Any = None, retain_graph: Any = None,
              create_graph: bool = False, grad_variables: Any = None, inputs: Any = None
              ) -> None:
    if create_graph or not _inside_ours() or traced(tensors):
        return _patched["backward"](tensors, grad_tensors, retain_graph, create_graph,
                                    grad_variables, inputs)
    try:
        from_torch(*check_backward_args(tensors, grad_tensors, inputs), inputs).backward(
            bool(retain_graph))
    finally:
        recompute.graph_done(bool(retain_graph))


def _grad(outputs: Any, inputs: Any, grad_outputs: Any = None, retain_graph: Any = None,
          create_graph: bool = False, only_inputs: bool = True, allow_unused: Any = None,
          is_grads_batched: bool = False, materialize_grads: bool = False) -> Any:
    if (create_graph or is_grads_batched or materialize_grads or not _inside_ours()
            or traced(outputs)):
        return _patched["grad"](outputs, inputs, grad_outputs, retain_graph, create_graph,
                                only_inputs, allow_unused, is_grads_batched, materialize_grads)
    try:
        g = from_torch(*check_backward_args(outputs, grad_outputs, inputs), inputs)
        res = get_default_engine().execute(g.roots, g.grads, bool(retain_graph), False, False,
                                           g.outputs)
    finally:
        recompute.graph_done(bool(retain_graph))
    for i, r in enumerate(res):
        if r is None and not allow_unused:
            raise RuntimeError(f"The differentiated Tensor at index {i} appears to not have "
                               "been used in the graph. Set allow_unused=True if this is the "
                               "desired behavior.")
    return tuple(to_torch(r, copy=True) for r in res)
