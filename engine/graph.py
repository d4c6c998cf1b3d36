"""The backward graph: ``Node``, ``Edge``, ``AccumulateGrad``, ``GraphRoot``.

Mirrors ``torch/csrc/autograd/function.h`` (Node, its ``sequence_nr``,
``topological_nr``, ``next_edges``, hooks, ``release_variables``),
``edge.h``, ``functions/accumulate_grad.cpp`` and ``functions/basic_ops.h``
(GraphRoot).

Departures, and why:
- ``name()`` returns ``"AccumulateGrad"`` and ``"GraphRoot"`` rather than the
  C++ ``"torch::autograd::AccumulateGrad"``: the short name is what students
  read in the app.  Every other node has PyTorch's generated name.
- Saved tensors are plain references (no ``SavedVariable`` version counter
  check); releasing them sets a flag so that a second backward raises
  PyTorch's "Trying to backward through the graph a second time" error.
- ``input_metadata`` keeps only shape, dtype and device (no streams); nodes whose
  inputs have equal ones share one tuple (``input_metadata_of``), where each C++ node
  holds its own copy inline: a Python node reaches it through pointers, and a shared
  tuple stays in the cache over a long backward pass.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from . import grad_mode

if TYPE_CHECKING:
    from .tensor import Tensor

#: AccumulateGrad's sequence number: the maximum, so a leaf runs as soon as it is ready.
UINT64_MAX = 2**64 - 1

_seq_tls = threading.local()


def _next_sequence_nr() -> int:
    """``at::sequence_number::get_and_increment``: a per-thread counter."""
    n = getattr(_seq_tls, "n", 0)
    _seq_tls.n = n + 1
    return n


def peek_sequence_nr() -> int:
    return getattr(_seq_tls, "n", 0)


SAVED_FREED = (
    "Trying to backward through the graph a second time (or directly access saved "
    "tensors after they have already been freed). Saved intermediate values of the "
    "graph are freed when you call .backward() or autograd.grad(). Specify "
    "retain_graph=True if you need to backward through the graph a second time or "
    "if you need to access saved tensors after calling backward."
)


class Edge(NamedTuple):
    """``torch::autograd::Edge``: the node a gradient flows to and which of its inputs."""

    function: Node | None
    input_nr: int

    def is_valid(self) -> bool:
        return self.function is not None


class InputMetadata(NamedTuple):
    shape: tuple[int, ...]
    dtype: Any
    device: str


#: InputMetadata shared by the nodes whose input has the same shape, dtype and device (a
#: tuple, never changed): a backward pass then reads one hot tuple, not one per node.
_interned_metadata: dict[tuple[Any, ...], InputMetadata] = {}
_INTERN_MAX = 4096  # distinct (shape, dtype, device) kept; the cache starts over past it


def input_metadata_of(shape: Sequence[int], dtype: Any, device: str) -> InputMetadata:
    """``InputMetadata(tuple(shape), dtype, device)``, the interned one when there is one.
    Only plain values are shared (a ``str`` device, ``int`` sizes, the very same dtype
    object): an equal key of another type (``np.int64(2)`` for ``2``) prints otherwise."""
    shape = tuple(shape)
    if type(device) is not str or not all(type(n) is int for n in shape):
        return InputMetadata(shape, dtype, device)
    key = (shape, dtype, device)
    try:
        meta = _interned_metadata.get(key)
    except TypeError:  # an unhashable dtype: nothing shared
        return InputMetadata(shape, dtype, device)
    if meta is None or meta.dtype is not dtype:
        meta = InputMetadata(shape, dtype, device)
        if len(_interned_metadata) >= _INTERN_MAX:
            _interned_metadata.clear()
        _interned_metadata[key] = meta
    return meta


class RemovableHandle:
    """What ``register_hook`` returns: ``.remove()`` takes the hook out again."""

    def __init__(self, hooks: list[Any], hook: Any) -> None:
        self._hooks = hooks
        self._hook = hook

    def remove(self) -> None:
        try:
            self._hooks.remove(self._hook)
        except ValueError:
            pass


class _SequenceNr(int):
    """An int that can be called: the engine and the ReadyQueue compare
    ``node._sequence_nr`` as an int, and ``node._sequence_nr()`` is PyTorch's method."""

    __slots__ = ()

    def __call__(self) -> int:
        return int(self)


class Node:
    """A backward function: ``apply`` maps gradients of its forward outputs
    (its *inputs*) to gradients of its forward inputs (one per ``next_edge``)."""

    # Node's own fields live in the object, as a C++ Node's do (a backward pass reads a
    # node's fields once or more per edge: one memory block, not the object and its
    # values); other attributes (a subclass's, an op's fields) go in a __dict__.
    __slots__ = ("_sequence_nr", "_next_edges", "_topological_nr", "_has_parent",
                 "_input_metadata", "_pre_hooks", "_post_hooks", "_tensor_pre_hooks",
                 "_retains_grad_hooks", "_saved", "_released", "metadata", "_eid",
                 "__dict__", "__weakref__")

    def __init__(self, next_edges: Sequence[Edge] = (), sequence_nr: int | None = None) -> None:
        self._sequence_nr = _SequenceNr(
            _next_sequence_nr() if sequence_nr is None else sequence_nr)
        self._next_edges: list[Edge] = []
        self._topological_nr = 0
        self._has_parent = False
        self._input_metadata: list[InputMetadata] = []
        self._pre_hooks: list[Callable[..., Any]] = []
        self._post_hooks: list[Callable[..., Any]] = []
        # output_nr -> list of tensor hooks (Tensor.register_hook on a non-leaf)
        self._tensor_pre_hooks: dict[int, list[Callable[..., Any]]] = {}
        # output_nr -> retain_grad hook (runs after the tensor pre-hooks)
        self._retains_grad_hooks: dict[int, Callable[..., Any]] = {}
        self._saved: dict[str, Any] | None = None
        self._released = False
        self.metadata: dict[str, Any] = {}
        self._eid: tuple[int, int] | None = None  # (engine generation, node id) for events
        if grad_mode.is_anomaly_enabled():
            # AnomalyMetadata: where the forward op was created.
            self.metadata["traceback_"] = "".join(traceback.format_stack(limit=12)[:-2])
        if next_edges:
            self.set_next_edges(next_edges)

    # --- identity ---------------------------------------------------------------
    def name(self) -> str:
        return type(self).__name__

    # ``_sequence_nr()`` (torch's spelling) is the callable int set in __init__.
    def sequence_nr(self) -> int:
        return int(self._sequence_nr)

    def topological_nr(self) -> int:
        return self._topological_nr

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"

    # --- edges ------------------------------------------------------------------
    def set_next_edges(self, edges: Sequence[Edge]) -> None:
        self._next_edges = list(edges)
        for e in self._next_edges:
            self._update_topological_nr(e)

    def add_next_edge(self, edge: Edge) -> None:
        self._update_topological_nr(edge)
        self._next_edges.append(edge)

    def _update_topological_nr(self, edge: Edge) -> None:
        # topological_nr = 1 + max over children; 0 for leaves (AccumulateGrad).
        fn = edge.function
        if fn is not None:
            fn._has_parent = True
            if self._topological_nr <= fn._topological_nr:
                self._topological_nr = fn._topological_nr + 1

    def next_edges(self) -> list[Edge]:
        return self._next_edges

    def next_edge(self, i: int) -> Edge:
        return self._next_edges[i]

    def num_outputs(self) -> int:
        return len(self._next_edges)

    @property
    def next_functions(self) -> tuple[tuple[Node | None, int], ...]:
        return tuple((e.function, e.input_nr) for e in self._next_edges)

    def should_compute_output(self, i: int) -> bool:
        return i < len(self._next_edges) and self._next_edges[i].function is not None

    # --- inputs (forward outputs) -------------------------------------------------
    def add_input_metadata(self, shape: tuple[int, ...], dtype: Any, device: str) -> int:
        self._input_metadata.append(input_metadata_of(shape, dtype, device))
        return len(self._input_metadata) - 1

    def num_inputs(self) -> int:
        return len(self._input_metadata)

    def input_metadata(self, i: int) -> InputMetadata:
        return self._input_metadata[i]

    def device(self) -> str:
        """``Node::device()``: the first non-CPU device among its inputs, else cpu."""
        for m in self._input_metadata:
            if m.device != "cpu":
                return m.device
        return "cpu"

    # --- hooks ------------------------------------------------------------------
    def register_hook(self, fn: Callable[..., Any]) -> RemovableHandle:
        """Post-hook ``fn(grad_inputs, grad_outputs)``; may return new grad_inputs."""
        self._post_hooks.append(fn)
        return RemovableHandle(self._post_hooks, fn)

    def register_prehook(self, fn: Callable[..., Any]) -> RemovableHandle:
        """Pre-hook ``fn(grad_outputs)``; may return new grad_outputs."""
        self._pre_hooks.append(fn)
        return RemovableHandle(self._pre_hooks, fn)

    def _add_tensor_pre_hook(self, output_nr: int, fn: Callable[..., Any]) -> RemovableHandle:
        hooks = self._tensor_pre_hooks.setdefault(output_nr, [])
        hooks.append(fn)
        return RemovableHandle(hooks, fn)

    def pre_hooks(self) -> list[Callable[..., Any]]:
        return self._pre_hooks

    def post_hooks(self) -> list[Callable[..., Any]]:
        return self._post_hooks

    def has_hooks(self) -> bool:
        return bool(
            self._pre_hooks or self._post_hooks or self._tensor_pre_hooks
            or self._retains_grad_hooks
        )

    # --- saved tensors ------------------------------------------------------------
    def save(self, /, **tensors: Any) -> None:
        self._saved = tensors

    def saved(self) -> dict[str, Any]:
        """Unpack the saved tensors; after ``release_variables`` this raises."""
        if self._released:
            raise RuntimeError(SAVED_FREED)
        return self._saved or {}

    def saved_tensor_summaries(self) -> dict[str, str]:
        if self._released:
            return {"(released)": ""}
        out = {}
        for k, v in (self._saved or {}).items():
            shape = getattr(v, "shape", None)
            out[k] = f"Tensor{list(shape)}" if shape is not None else repr(v)
        return out

    def release_variables(self) -> None:
        if self._saved:
            self._saved = None
            self._released = True

    def node_meta(self) -> dict[str, Any] | None:
        """Facts the engine does not use, for the views (``node_meta``): a PyTorch node's."""
        return None

    # --- execution ----------------------------------------------------------------
    def apply(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        raise NotImplementedError

    def __call__(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        return self.apply(grads)


class AccumulateGrad(Node):
    """``functions/accumulate_grad.cpp``: the sink for a leaf's gradient."""

    def __init__(self, variable: Tensor) -> None:
        super().__init__(sequence_nr=UINT64_MAX)
        self.variable = variable
        self.add_input_metadata(variable.shape, variable.dtype, variable.device)
        self._lock = threading.Lock()

    def apply(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        new_grad = grads[0]
        if new_grad is None:
            return []
        var = self.variable
        if var.grad_fn is not None:
            raise RuntimeError("leaf variable has been moved into the graph interior")
        if not var.requires_grad:
            return []
        lock = self._lock
        lock.acquire()  # (``with``, unrolled: the context manager costs twice as much)
        try:
            # accumulateGrad(): first gradient is stolen (here: copied, as the
            # incoming buffer may alias a user tensor); later ones are added,
            # in place unless grad mode is on (create_graph), then out of place.
            if var._grad is None:
                if grad_mode.is_grad_enabled():
                    var._grad = new_grad
                else:
                    var._grad = _copy_of(new_grad)
            elif grad_mode.is_grad_enabled():
                var._grad = var._grad + new_grad
            else:
                var._grad.data += new_grad.data
        finally:
            lock.release()
        return []

    @property
    def tensor_hooks_source(self) -> Tensor:
        return self.variable


def _copy_of(t: Tensor) -> Tensor:
    """``t.detach().clone()`` without grad mode; for a C-contiguous NumPy array (a
    gradient, nearly always) the copy that clone would make, without its two tensors
    and op dispatch."""
    data = t.data
    if type(t) is _tensor.Tensor and type(data) is np.ndarray and data.flags.c_contiguous:
        return _tensor._tensor_of(np.array(data, copy=True), t.device)  # _clone's dense case
    return t.detach().clone()


class GraphRoot(Node):
    """``functions/basic_ops.h`` GraphRoot: hands the root gradients to several roots."""

    def __init__(self, functions: Sequence[Edge], inputs: Sequence[Tensor | None]) -> None:
        super().__init__(functions)
        self.outputs = list(inputs)
        for t in self.outputs:
            if t is not None:
                self.add_input_metadata(t.shape, t.dtype, t.device)

    def apply(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        return list(self.outputs)


class Identity(Node):
    """Output edge for an input that is not reachable (NOTE [Autograd Unreachable Input])."""

    def apply(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        return grads


class Error(Node):
    """A node that raises when run (used for ``once_differentiable`` style backward graphs)."""

    def __init__(self, msg: str, next_edges: Sequence[Edge] = ()) -> None:
        super().__init__(next_edges)
        self.msg = msg

    def apply(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        raise RuntimeError(self.msg)


def gradient_edge(t: Tensor) -> Edge:
    """``impl::gradient_edge``: grad_fn for interior tensors, the accumulator for leaves."""
    if t.grad_fn is not None:
        return Edge(t.grad_fn, t.output_nr)
    if t.requires_grad:
        return Edge(t._get_grad_accumulator(), 0)
    return Edge(None, 0)


def collect_next_edges(*tensors: Tensor | None) -> list[Edge]:
    out = []
    for t in tensors:
        if t is None or not t.requires_grad:
            out.append(Edge(None, 0))
        else:
            out.append(gradient_edge(t))
    return out


# tensor.py imports this module (Node, AccumulateGrad): the module, not its names, here,
# at the end (whichever of the two is imported first, the other's names are read at call time)
from . import tensor as _tensor  # noqa: E402
