"""Forward ops and their backward nodes.

Mirrors ATen's ops and ``tools/autograd/derivatives.yaml``: each op records one
node named as PyTorch names it (``MulBackward0``, ``SumBackward1``, ...), with
the same next edges (a Python scalar operand is a constant: its edge is
invalid, as in PyTorch), so the backward graph has PyTorch's shape and
sequence numbers.  Every backward formula is written with Tensor ops, so a
backward run with ``create_graph=True`` records a graph of its own (double
backward).  As in PyTorch, the reduction of a broadcast gradient to an
input's shape is not done by the node but by the engine's ``validate_outputs``
(``at::sum_to``).  Each op lays its output out with PyTorch's strides (a view
keeps its base's, an elementwise result gets TensorIterator's), by the rules
in ``strides.py``, because ``reshape`` records a different node for a
non-contiguous input.

Departures: ``functional.linear`` is one ``LinearBackward0`` node with three
inputs (input, weight, bias), the seeds' LinearFunction, where PyTorch records
``TBackward0`` + ``AddmmBackward0``; ReLU's double backward goes through a
mask multiply rather than ``threshold_backward``.

Array modules: where ATen dispatches a kernel to its tensors' device, an op here
makes its arrays with the module of its inputs (``device.array_module``: NumPy
or CuPy), through NumPy's ufuncs (which CuPy arrays take over) and array
methods, so a CuPy array never goes through the host.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import device as _dev
from . import grad_mode
from .errstate import errors_ignored
from .graph import Node, collect_next_edges
from .strides import (
    as_strided,
    compute_stride,
    contiguous,
    contiguous_strides,
    element_strides,
    elementwise_layout,
    infer_dense_strides,
    infer_size,
    is_contiguous,
    is_non_overlapping_and_dense,
    restride,
)
from .tensor import Tensor

Grads = list[Tensor | None]


# --- helpers -------------------------------------------------------------------
def _check_same_device(*ts: Any) -> str:
    devs = {t.device for t in ts if isinstance(t, Tensor) and t.ndim > 0 or
            isinstance(t, Tensor) and t.requires_grad}
    devs |= {t.device for t in ts if isinstance(t, Tensor)}
    if len(devs) > 1:
        a, b = sorted(devs)[:2]
        raise RuntimeError(
            "Expected all tensors to be on the same device, but found at least two "
            f"devices, {b} and {a}!"
        )
    return devs.pop() if devs else "cpu"


def _record(out: Tensor, node_cls: type[Node], inputs: Sequence[Any], **saved: Any) -> Tensor:
    """Attach a backward node to ``out`` if grad mode is on and an input requires grad."""
    if not grad_mode.is_grad_enabled():
        return out
    if not builtins.any(isinstance(t, Tensor) and t.requires_grad for t in inputs):
        return out
    node = node_cls()
    # A Python scalar is a constant: its edge is invalid (Edge(None, 0)), as in PyTorch.
    node.set_next_edges(collect_next_edges(*[t if isinstance(t, Tensor) else None
                                             for t in inputs]))
    if saved:
        node.save(**saved)
    node.add_input_metadata(out.shape, out.dtype, out.device)
    out.grad_fn = node
    out.output_nr = 0
    return out


def _wrap(x: Any, like: Tensor) -> Any:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (int, float, bool, np.number)):
        return x
    raise TypeError(f"unsupported operand type: {type(x).__name__}")


def _data(x: Any) -> Any:
    return x.data if isinstance(x, Tensor) else x


def _new(data: Any, device: str) -> Tensor:
    # a NumPy scalar (a 0-dim result) becomes a 0-dim array; any other array is kept
    return Tensor(np.asarray(data) if isinstance(data, np.generic) else data, device=device)


def _shape_of(x: Any) -> tuple[int, ...]:
    return x.shape if isinstance(x, Tensor) else ()


# --- broadcasting --------------------------------------------------------------
def sum_to(g: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``at::sum_to``: sum a broadcast gradient back to ``shape`` (differentiably)."""
    if g.shape == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    dims = list(range(lead))
    for i, n in enumerate(shape):
        if n == 1 and g.shape[lead + i] != 1:
            dims.append(lead + i)
    r = sum(g, dims, keepdim=True) if dims else g
    return reshape(r, tuple(shape)) if r.shape != tuple(shape) else r


def is_expandable_to(shape: tuple[int, ...], desired: tuple[int, ...]) -> bool:
    if len(shape) > len(desired):
        return False
    for a, b in zip(reversed(shape), reversed(desired)):
        if a != b and a != 1:
            return False
    return True


# --- binary arithmetic ---------------------------------------------------------
def _computes(node: Node) -> tuple[bool, bool]:
    """``should_compute_output(0)`` and ``(1)`` of a binary op's node, in one call."""
    edges = node._next_edges
    n = len(edges)
    return (n > 0 and edges[0].function is not None,
            n > 1 and edges[1].function is not None)


class AddBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        g = grads[0]
        c0, c1 = _computes(self)
        return [g if c0 else None, g if c1 else None]


class SubBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        g = grads[0]
        return [g if self.should_compute_output(0) else None,
                neg(g) if self.should_compute_output(1) else None]


class RsubBackward1(Node):
    def apply(self, grads: Grads) -> Grads:
        return [neg(grads[0])]


class MulBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        g = grads[0]
        c0, c1 = _computes(self)
        return [mul(g, s["other"]) if c0 else None, mul(g, s["self"]) if c1 else None]


class DivBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        g, a, b = grads[0], s["self"], s["other"]
        ga = div(g, b) if self.should_compute_output(0) else None
        gb = None
        if self.should_compute_output(1):
            gb = neg(div(mul(g, a), mul(b, b)))
        return [ga, gb]


class NegBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        return [neg(grads[0])]


class PowBackward0(Node):
    """``t ** scalar``: ``pow_backward``."""

    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        e = s["exponent"]
        if e == 0:
            return [zeros_like_t(grads[0])]
        return [mul(grads[0], mul(pow(s["self"], e - 1), e))]


class PowBackward1(Node):
    """``t ** t``: ``pow_backward_self`` and ``pow_backward_exponent``."""

    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        g, a, e, result = grads[0], s["self"], s["exponent"], s["result"]
        ga = gb = None
        if self.should_compute_output(0):
            ga = mul(g, mul(e, pow(a, sub(e, 1))))
            ga = where_const(e.data == 0, ga, 0.0)
        if self.should_compute_output(1):
            mask = (a.data == 0) & (e.data >= 0)
            with np.errstate(divide="ignore", invalid="ignore"):
                gb = mul(g, where_const(mask, mul(result, log(a)), 0.0))
        return [ga, gb]


class PowBackward2(Node):
    """``scalar ** t``."""

    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        base, e, result = s["base"], s["exponent"], s["result"]
        if base == 0:
            return [where_const(e.data >= 0, mul(grads[0], 0.0), 0.0)]
        return [mul(mul(grads[0], result), float(np.log(base)))]


def _check_broadcast(a: Any, b: Any) -> None:
    """The broadcasting ``at::infer_size``'s error (ExpandUtils.cpp, not
    ``strides.infer_size``) for shapes that do not broadcast, in PyTorch's words."""
    sa, sb = _shape_of(a), _shape_of(b)
    nd = builtins.max(len(sa), len(sb))
    for i in range(nd - 1, -1, -1):
        off = nd - 1 - i
        x = sa[len(sa) - 1 - off] if len(sa) - 1 - off >= 0 else 1
        y = sb[len(sb) - 1 - off] if len(sb) - 1 - off >= 0 else 1
        if x != y and x != 1 and y != 1:
            raise RuntimeError(
                f"The size of tensor a ({x}) must match the size of tensor b ({y}) "
                f"at non-singleton dimension {i}"
            )


# (shape, itemsize) -> NumPy's byte strides of a contiguous array, as PyTorch lays it out
# (None for a shape with a zero, whose layout rules are left to the slow path)
_DENSE_STRIDES: dict[tuple[tuple[int, ...], int], tuple[int, ...] | None] = {}


def _is_dense(arr: np.ndarray) -> bool:
    """True if ``arr`` has ``contiguous_strides`` exactly (so ``restride`` keeps it)."""
    if arr.ndim == 1:
        return arr.strides[0] == arr.itemsize  # contiguous_strides((n,)) == (1,)
    key = (arr.shape, arr.itemsize)
    strides = _DENSE_STRIDES.get(key, False)
    if strides is False:
        strides = (None if 0 in arr.shape else
                   tuple(s * arr.itemsize for s in contiguous_strides(arr.shape)))
        if len(_DENSE_STRIDES) < 4096:
            _DENSE_STRIDES[key] = strides
    return arr.strides == strides


def _elementwise(a: Tensor, b: Any, np_fn: Any) -> Tensor:
    """``np_fn(a, b)`` (``b`` wrapped) on one device, laid out as TensorIterator lays it out."""
    ad = a.data
    # Fast path (the backward pass's usual case): where the checks below cannot fail
    # and ``elementwise_strides`` gives ``contiguous_strides``: NumPy operands of one
    # shape on one device, C-contiguous (its own first test), or a scalar with a
    # 0- or 1-dim tensor (always contiguous) or a dense one.  The result is then the
    # slow path's array, laid out again only if NumPy's layout is not that one.
    if type(ad) is np.ndarray:
        if isinstance(b, Tensor):
            bd = b.data
            fast = (type(bd) is np.ndarray and a.device == b.device and ad.shape == bd.shape
                    and ad.flags.c_contiguous and bd.flags.c_contiguous)
        else:
            bd = b
            fast = ad.ndim <= 1 or _is_dense(ad)
        if fast:
            if errors_ignored():
                data = np_fn(ad, bd)
            else:
                with np.errstate(all="ignore"):
                    data = np_fn(ad, bd)
            if type(data) is not np.ndarray or not _is_dense(data):
                data = elementwise_layout(data, ad, bd)
            return Tensor(data, device=a.device)
    dev = _check_same_device(a, b)
    _check_broadcast(a, b)
    with np.errstate(all="ignore"):  # inf * 0, inf - inf: NaN, silently, as in torch
        data = np_fn(ad, _data(b))
    return _new(elementwise_layout(data, ad, _data(b)), dev)


def _binary(a: Tensor, b: Any, np_fn: Any, node_cls: type[Node], **save: Any) -> Tensor:
    b = _wrap(b, a)
    return _record(_elementwise(a, b, np_fn), node_cls, (a, b), **save)


def add(a: Tensor, b: Any) -> Tensor:
    return _binary(a, b, np.add, AddBackward0)


def sub(a: Tensor, b: Any) -> Tensor:
    return _binary(a, b, np.subtract, SubBackward0)


def rsub(a: Tensor, b: Any) -> Tensor:
    """``b - a`` for a scalar ``b``: ``RsubBackward1`` with a single edge."""
    # ATen: sub(wrapped_scalar(b), a): the scalar is the first operand
    out = _new(elementwise_layout(np.subtract(_data(b), a.data), _data(b), a.data), a.device)
    return _record(out, RsubBackward1, (a,))


def mul(a: Tensor, b: Any) -> Tensor:
    b = _wrap(b, a)
    if not grad_mode.is_grad_enabled():  # nothing to record (a backward pass, usually)
        return _elementwise(a, b, np.multiply)
    if a.requires_grad or getattr(b, "requires_grad", 0):
        return _binary(a, b, np.multiply, MulBackward0, self=a, other=b)
    return _binary(a, b, np.multiply, MulBackward0)


def div(a: Tensor, b: Any) -> Tensor:
    b = _wrap(b, a)
    need = grad_mode.is_grad_enabled() and (a.requires_grad or getattr(b, "requires_grad", 0))
    with np.errstate(divide="ignore", invalid="ignore"):
        return _binary(a, b, np.divide, DivBackward0,
                       **({"self": a, "other": b} if need else {}))


def neg(a: Tensor) -> Tensor:
    out = _new(elementwise_layout(np.negative(a.data), a.data), a.device)
    return _record(out, NegBackward0, (a,))


def pow(a: Tensor, e: Any) -> Tensor:  # noqa: A001 - torch's name
    if isinstance(e, Tensor):
        dev = _check_same_device(a, e)
        _check_broadcast(a, e)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = _new(elementwise_layout(np.power(a.data, e.data), a.data, e.data), dev)
        need = grad_mode.is_grad_enabled() and (a.requires_grad or e.requires_grad)
        return _record(out, PowBackward1, (a, e),
                       **({"self": a, "exponent": e, "result": out} if need else {}))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = _new(elementwise_layout(np.power(a.data, e), a.data), a.device)
    need = grad_mode.is_grad_enabled() and a.requires_grad
    return _record(out, PowBackward0, (a,), **({"self": a, "exponent": e} if need else {}))


def rpow(a: Tensor, base: Any) -> Tensor:
    """``base ** a`` for a scalar base."""
    with np.errstate(divide="ignore", invalid="ignore"):
        # pow(Scalar, Tensor)'s meta function allocates a contiguous output
        out = _new(contiguous(np.power(base, a.data)), a.device)
    need = grad_mode.is_grad_enabled() and a.requires_grad
    return _record(out, PowBackward2, (a,),
                   **({"base": base, "exponent": a, "result": out} if need else {}))


def compare(a: Tensor, b: Any, np_fn: Any) -> Tensor:
    return _new(np_fn(a.data, _data(b)), a.device)


def where_const(mask: Any, t: Tensor, value: float) -> Tensor:
    """``where(mask, value, t)`` with a constant mask: a multiply, so it stays differentiable."""
    xp = _dev.array_module(t.data)
    mask = xp.asarray(mask)
    if not mask.any():
        return t
    keep = xp.where(mask, 0.0, 1.0).astype(t.dtype)
    out = mul(t, _new(keep, t.device))
    if value != 0.0:
        out = add(out, _new(xp.where(mask, value, 0.0).astype(t.dtype), t.device))
    return out


def zeros_like_t(t: Tensor) -> Tensor:
    with _dev.on_device(t.device):
        return _new(_dev.array_module(t.data).zeros_like(t.data), t.device)


# --- unary ---------------------------------------------------------------------
class ExpBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        return [mul(grads[0], self.saved()["result"])]


class LogBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        return [div(grads[0], self.saved()["self"])]


class ReciprocalBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        r = self.saved()["result"]
        return [neg(mul(grads[0], mul(r, r)))]


class ReluBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        r = self.saved()["result"]
        return [mul(grads[0], _new((r.data > 0).astype(r.dtype), r.device))]


class SigmoidBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        r = self.saved()["result"]
        return [mul(grads[0], mul(r, rsub(r, 1.0)))]


class TanhBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        r = self.saved()["result"]
        return [mul(grads[0], rsub(mul(r, r), 1.0))]


def _unary(a: Tensor, fn: Any, node_cls: type[Node], save: str) -> Tensor:
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = _new(elementwise_layout(fn(a.data), a.data), a.device)
    if grad_mode.is_grad_enabled() and a.requires_grad:
        return _record(out, node_cls, (a,), **{save: out if save == "result" else a})
    return out


def exp(a: Tensor) -> Tensor:
    return _unary(a, np.exp, ExpBackward0, "result")


def log(a: Tensor) -> Tensor:
    return _unary(a, np.log, LogBackward0, "self")


def reciprocal(a: Tensor) -> Tensor:
    return _unary(a, np.reciprocal, ReciprocalBackward0, "result")


def relu(a: Tensor) -> Tensor:
    return _unary(a, lambda x: np.maximum(x, 0).astype(x.dtype), ReluBackward0, "result")


def sigmoid(a: Tensor) -> Tensor:
    return _unary(a, lambda x: 1.0 / (1.0 + np.exp(-x)), SigmoidBackward0, "result")


def tanh(a: Tensor) -> Tensor:
    return _unary(a, np.tanh, TanhBackward0, "result")


# --- reductions and shapes -----------------------------------------------------
def _norm_dims(dim: int | Sequence[int], ndim: int) -> tuple[int, ...]:
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return tuple(sorted(d % builtins.max(ndim, 1) for d in dims))


def _unsqueeze_shape(g: Tensor, in_shape: tuple[int, ...], dims: tuple[int, ...],
                     keepdim: bool) -> Tensor:
    if keepdim or not dims:
        return g
    kshape = tuple(1 if i in dims else n for i, n in enumerate(in_shape))
    return reshape(g, kshape)


class SumBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        return [expand(grads[0], self._self_sizes)]


class SumBackward1(Node):
    def apply(self, grads: Grads) -> Grads:
        g = _unsqueeze_shape(grads[0], self._self_sizes, self._dims, self._keepdim)
        return [expand(g, self._self_sizes)]


class MeanBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        n = builtins.max(int(np.prod(self._self_sizes)), 1)
        return [div(expand(grads[0], self._self_sizes), n)]


class MeanBackward1(Node):
    def apply(self, grads: Grads) -> Grads:
        g = _unsqueeze_shape(grads[0], self._self_sizes, self._dims, self._keepdim)
        # a 0-dim input reduced over dim 0 / -1 has one element
        n = int(np.prod([self._self_sizes[d] for d in self._dims
                         if d < len(self._self_sizes)]))
        return [div(expand(g, self._self_sizes), builtins.max(n, 1))]


def _reduce(a: Tensor, dim: Any, keepdim: bool, method: str,
            node0: type[Node], node1: type[Node]) -> Tensor:
    # the array's own method (``np.sum`` calls it too): CuPy's runs on the device
    reduce = getattr(a.data, method)
    if dim is None:
        with np.errstate(all="ignore"):  # inf + -inf: NaN, silently, as in torch
            data = reduce()
        out = _record(_new(contiguous(data), a.device), node0, (a,))
        dims: tuple[int, ...] = tuple(range(a.ndim))
    else:
        dims = _norm_dims(dim, a.ndim)
        with np.errstate(all="ignore"):
            data = reduce(axis=dims if a.ndim else None, keepdims=keepdim)
        out = _record(_new(contiguous(data), a.device), node1, (a,))
    if out.grad_fn is not None:
        node: Any = out.grad_fn
        node._self_sizes, node._dims, node._keepdim = a.shape, dims, keepdim
    return out


def sum(a: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return _reduce(a, dim, keepdim, "sum", SumBackward0, SumBackward1)


def mean(a: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    return _reduce(a, dim, keepdim, "mean", MeanBackward0, MeanBackward1)


class ViewBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        return [reshape(grads[0], self._self_sizes)]


class ExpandBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        return [sum_to(grads[0], self._self_sizes)]


class TBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        return [t(grads[0])]


class CloneBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        return [grads[0]]


class ReshapeAliasBackward0(Node):
    """``_reshape_alias``: what ``reshape`` records for a non-contiguous view."""

    def apply(self, grads: Grads) -> Grads:
        return [reshape(grads[0], self._self_sizes)]


class UnsafeViewBackward0(Node):
    """``_unsafe_view``: what ``reshape`` records after copying (``clone`` + view)."""

    def apply(self, grads: Grads) -> Grads:
        return [reshape(grads[0], self._self_sizes)]


class AliasBackward0(Node):
    """``alias``: indexing that selects everything (``x[:, :]``, ``x[()]``)."""

    def apply(self, grads: Grads) -> Grads:
        return [grads[0]]


class ToCopyBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        return [to(grads[0], self._src_device, self._src_dtype)]


def _with_sizes(out: Tensor, a: Tensor) -> Tensor:
    if out.grad_fn is not None:
        out.grad_fn._self_sizes = a.shape  # type: ignore[attr-defined]
    return out


def reshape(a: Tensor, shape: Sequence[int]) -> Tensor:
    """``at::reshape``: ``view`` if contiguous, else ``_reshape_alias`` if the new
    shape is viewable (``computeStride``), else ``clone`` + ``_unsafe_view``."""
    shape = infer_size(shape, a.numel())
    data = a.data
    if not isinstance(data, np.ndarray):  # CuPy: no stride bookkeeping
        return _with_sizes(_record(_new(data.reshape(shape), a.device), ViewBackward0, (a,)), a)
    old_strides = element_strides(data)
    strides = compute_stride(a.shape, old_strides, shape)
    if is_contiguous(a.shape, old_strides):
        assert strides is not None
        node_cls: type[Node] = ViewBackward0
    elif strides is not None:
        node_cls = ReshapeAliasBackward0
    else:
        a = _clone(a, contiguous=True)
        data = a.data
        strides = compute_stride(a.shape, element_strides(data), shape)
        assert strides is not None
        node_cls = UnsafeViewBackward0
    out = _new(as_strided(data, shape, strides), a.device)
    return _with_sizes(_record(out, node_cls, (a,)), a)


def expand(a: Tensor, shape: Sequence[int]) -> Tensor:
    shape = tuple(a.shape[i - (len(shape) - a.ndim)] if n == -1 else n
                  for i, n in enumerate(shape))
    if a.shape == shape:
        return a if not grad_mode.is_grad_enabled() else _with_sizes(
            _record(_new(a.data, a.device), ExpandBackward0, (a,)), a)
    xp = _dev.array_module(a.data)
    try:
        data = xp.broadcast_to(a.data, shape)
    except ValueError:
        raise RuntimeError(
            f"The expanded size of the tensor must match the existing size at non-singleton "
            f"dimension: expand({list(a.shape)}) to {list(shape)}"
        ) from None
    return _with_sizes(_record(_new(xp.array(data), a.device), ExpandBackward0, (a,)), a)


def t(a: Tensor) -> Tensor:
    if a.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {a.ndim}D")
    return _record(_new(a.data.T, a.device), TBackward0, (a,))


def clone(a: Tensor) -> Tensor:
    return _clone(a, contiguous=False)


def _clone(a: Tensor, contiguous: bool) -> Tensor:
    """``clone(memory_format=preserve)`` keeps dense strides (else the dimension order);
    ``contiguous=True`` is ``MemoryFormat::Contiguous``."""
    data = a.data
    if type(data) is np.ndarray and _is_dense(data):
        # Dense and contiguous (a gradient, usually): both memory formats keep the
        # layout, which NumPy's copy keeps too (checked: ``restride`` is the fallback).
        copy = np.array(data, copy=True)
        if not _is_dense(copy):
            copy = restride(copy, None)
    elif isinstance(data, np.ndarray):
        st = element_strides(data)
        if contiguous:
            strides: tuple[int, ...] | None = None
        elif is_non_overlapping_and_dense(data.shape, st):
            strides = st
        else:
            strides = infer_dense_strides(data.shape, st)
        copy = restride(np.array(data, copy=True), strides)
    else:
        copy = data.copy()
    return _record(_new(copy, a.device), CloneBackward0, (a,))


def to(a: Tensor, device: str | None, dtype: Any = None) -> Tensor:
    if dtype is None and isinstance(device, (type, np.dtype)):  # ``t.to(dtype)``
        device, dtype = None, device
    dev = _dev.canonical(device) if device is not None else a.device
    if dev == a.device and (dtype is None or np.dtype(dtype) == a.dtype):
        return a
    data = a.data if dtype is None else a.data.astype(dtype)
    out = _record(_new(_dev.to_device_array(data, dev), dev), ToCopyBackward0, (a,))
    if out.grad_fn is not None:
        out.grad_fn._src_device = a.device  # type: ignore[attr-defined]
        out.grad_fn._src_dtype = a.dtype  # type: ignore[attr-defined]
    return out


# --- matrix products -----------------------------------------------------------
class MmBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        g = grads[0]
        return [mm(g, t(s["mat2"])) if self.should_compute_output(0) else None,
                mm(t(s["self"]), g) if self.should_compute_output(1) else None]


class DotBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        g = grads[0]
        return [mul(s["tensor"], g) if self.should_compute_output(0) else None,
                mul(s["self"], g) if self.should_compute_output(1) else None]


class MvBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        g = grads[0]
        ga = gb = None
        if self.should_compute_output(0):
            ga = mm(reshape(g, (-1, 1)), reshape(s["vec"], (1, -1)))
        if self.should_compute_output(1):
            gb = mv(t(s["self"]), g)
        return [ga, gb]


class UnsqueezeBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        return [reshape(grads[0], self._self_sizes)]


class SqueezeBackward4(Node):
    """``squeeze_(dim)``, in place on the ``mm`` result of a 1-D @ 2-D ``matmul``."""

    def apply(self, grads: Grads) -> Grads:
        return [reshape(grads[0], self._self_sizes)]


def _unsqueeze0(a: Tensor) -> Tensor:
    """``unsqueeze(0)``: a view; the new dimension's stride is size(0) * stride(0)."""
    data = a.data
    if isinstance(data, np.ndarray):
        st = element_strides(data)
        view = as_strided(data, (1, *a.shape), (a.shape[0] * st[0] if st else 1, *st))
    else:
        view = data.reshape((1, *a.shape))
    return _with_sizes(_record(_new(view, a.device), UnsqueezeBackward0, (a,)), a)


def _squeeze0(a: Tensor) -> Tensor:
    data = a.data
    if isinstance(data, np.ndarray):
        view = as_strided(data, a.shape[1:], element_strides(data)[1:])
    else:
        view = data.reshape(a.shape[1:])
    return _with_sizes(_record(_new(view, a.device), SqueezeBackward4, (a,)), a)


def _mat(a: Tensor, b: Tensor, fn: Any, node_cls: type[Node], names: tuple[str, str]) -> Tensor:
    dev = _check_same_device(a, b)
    with np.errstate(all="ignore"):  # inf * 0 inside the product: NaN, as in torch
        data = fn(a.data, b.data)
    out = _new(contiguous(data), dev)
    need = grad_mode.is_grad_enabled() and (a.requires_grad or b.requires_grad)
    return _record(out, node_cls, (a, b), **({names[0]: a, names[1]: b} if need else {}))


def mm(a: Tensor, b: Tensor) -> Tensor:
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and "
            f"{b.shape[0]}x{b.shape[1]})"
        )
    return _mat(a, b, np.matmul, MmBackward0, ("self", "mat2"))


def dot(a: Tensor, b: Tensor) -> Tensor:
    return _mat(a, b, lambda x, y: x.dot(y), DotBackward0, ("self", "tensor"))


def mv(a: Tensor, b: Tensor) -> Tensor:
    return _mat(a, b, np.matmul, MvBackward0, ("self", "vec"))


def matmul(a: Tensor, b: Tensor) -> Tensor:
    if not isinstance(b, Tensor):
        raise TypeError("matmul(): argument 'other' must be Tensor")
    if a.ndim == 1 and b.ndim == 1:
        if a.shape != b.shape:
            raise RuntimeError(
                f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src "
                f"[{b.shape[0]}] to have the same "
                f"number of elements, but got {a.shape[0]} and {b.shape[0]} elements respectively"
            )
        return dot(a, b)
    if a.ndim == 2 and b.ndim == 2:
        return mm(a, b)
    if a.ndim == 2 and b.ndim == 1:
        return mv(a, b)
    if a.ndim == 1 and b.ndim == 2:
        # at::matmul: a.unsqueeze(0).mm(b).squeeze_(0)
        return _squeeze0(mm(_unsqueeze0(a), b))
    raise RuntimeError(
        f"matmul of {a.ndim}-D and {b.ndim}-D tensors is not supported by this engine "
        "(use 1-D or 2-D operands)"
    )


# --- indexing ------------------------------------------------------------------
class SelectBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        return [_scatter_zeros(grads[0], self._self_sizes, self._key, SelectBackwardBackward0)]


class SliceBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        return [_scatter_zeros(grads[0], self._self_sizes, self._key, SliceBackwardBackward0)]


class SelectBackwardBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        return [_getitem_raw(grads[0], self._key, SelectBackward0)]


class SliceBackwardBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        return [_getitem_raw(grads[0], self._key, SliceBackward0)]


def _scatter_zeros(g: Tensor, sizes: tuple[int, ...], key: tuple[Any, ...],
                   node_cls: type[Node]) -> Tensor:
    with _dev.on_device(g.device):
        data = _dev.array_module(g.data).zeros(sizes, dtype=g.dtype)
    data[key] = g.data
    out = _record(_new(data, g.device), node_cls, (g,))
    if out.grad_fn is not None:
        out.grad_fn._key = key  # type: ignore[attr-defined]
    return out


def _getitem_raw(a: Tensor, key: tuple[Any, ...], node_cls: type[Node]) -> Tensor:
    # a view, with the base's strides, as select/slice return (``...`` keeps a 0-d result
    # an array)
    out = _with_sizes(_record(_new(a.data[key + (Ellipsis,)], a.device), node_cls, (a,)), a)
    if out.grad_fn is not None:
        out.grad_fn._key = key  # type: ignore[attr-defined]
    return out


def _is_full_slice(k: slice, n: int) -> bool:
    """``applySlice``'s shortcut: start 0, stop past the end, step 1 select everything."""
    return (k.start in (None, 0) and (k.stop is None or k.stop >= n)
            and k.step in (None, 1))


def index(a: Tensor, key: Any) -> Tensor:
    """Integer and slice indexing as a chain of ``select``/``slice``, as PyTorch records it.

    A lone slice (``x[:]``) always records a slice; inside a tuple, a slice that
    selects everything is skipped, and if nothing is left the result is an alias."""
    multi = isinstance(key, tuple)
    if not multi:
        key = (key,)
    out, dim = a, 0
    for k in key:
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer, slice)):
            raise TypeError(
                f"only integers and slices are valid indices here (got {type(k).__name__})"
            )
        if dim >= out.ndim:
            raise IndexError(
                f"too many indices for tensor of dimension {a.ndim}"
            )
        full = (slice(None),) * dim
        if isinstance(k, slice):
            if multi and _is_full_slice(k, out.shape[dim]):
                dim += 1
                continue
            out = _getitem_raw(out, full + (k,), SliceBackward0)
            dim += 1
        else:
            n = out.shape[dim]
            if not -n <= k < n:
                raise IndexError(
                    f"index {k} is out of bounds for dimension {dim} with size {n}"
                )
            out = _getitem_raw(out, full + (int(k) % n,), SelectBackward0)
    if out is a:
        out = _record(_new(a.data[...], a.device), AliasBackward0, (a,))
    return out


# --- linear --------------------------------------------------------------------
class LinearBackward0(Node):
    """One node, three inputs (input, weight, bias): the seeds' LinearFunction."""

    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        g, x, w = grads[0], s["input"], s["weight"]
        gx = gw = gb = None
        g2 = reshape(g, (1, -1)) if g.ndim == 1 else g
        x2 = reshape(x, (1, -1)) if x.ndim == 1 else x
        if self.should_compute_output(0):
            gx = mm(g2, w)
            if x.ndim == 1:
                gx = reshape(gx, x.shape)
        if self.should_compute_output(1):
            gw = mm(t(g2), x2)
        if self.should_compute_output(2):
            gb = g  # validate_outputs sums the batch dimension away
        return [gx, gw, gb]


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    if x.ndim not in (1, 2) or weight.ndim != 2:
        raise RuntimeError("linear(): input must be 1-D or 2-D and weight 2-D")
    dev = _check_same_device(x, weight, *( [bias] if bias is not None else []))
    if x.shape[-1] != weight.shape[1]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied "
            f"({1 if x.ndim == 1 else x.shape[0]}x{x.shape[-1]} and "
            f"{weight.shape[1]}x{weight.shape[0]})"
        )
    data = x.data @ weight.data.T
    if bias is not None:
        data = data + bias.data
    out = _new(contiguous(data), dev)
    need = grad_mode.is_grad_enabled()
    return _record(out, LinearBackward0, (x, weight, bias),
                   **({"input": x, "weight": weight} if need else {}))
