"""The arithmetic operators and the binary pointwise ops: ``+ - * /`` (``add``, ``sub``,
``rsub``, ``mul``, ``div``), unary minus (``neg``), ``maximum``/``minimum``, ``where`` and
the comparisons, each with its backward node.

Mirrors ATen's binary ops and their ``derivatives.yaml`` formulas (``mul_tensor_backward``,
``div_tensor_self_backward``/``div_tensor_other_backward``, ``at::where``'s masked
gradients), written with Tensor ops so a double backward records.  A Python scalar
operand is a constant: its edge is invalid, as in PyTorch.

Departures: ``neg`` lives here, not with the unary functions in ``pointwise.py``: it is
the operator ``-a`` that ``sub``'s and ``div``'s gradients are written with, and the
unary functions' formulas are written with this module, so the imports go one way.
``MulBackward0`` without grad mode (a backward pass without ``create_graph``) skips
``mul()``: nothing is recorded, and for a 1-dim float32/float64 gradient times a tensor of
its shape, dtype and device, or times a Python float, it multiplies the arrays at once
(``_product_1d``: ``elementwise``'s result, without its general checks, its tensor made
by ``tensor._tensor_of``; ``MulBackward0`` inlines ``saved()`` and ``errors_ignored()``:
two Python calls per product instead of four).
A comparison records nothing (a bool result has no gradient); masks are constants, made
with their operand's array module on its device.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import device as _dev
from .. import grad_mode
from ..dtypes import binary_result_type, float_result_type, result_type
from ..errstate import _ignoring
from ..errstate import _state as _errstate
from ..grad_mode import _tls as _grad_tls
from ..graph import SAVED_FREED
from ..strides import elementwise_layout
from ..tensor import Tensor, _tensor_of
from .base import (
    Grads,
    OpNode,
    _any_grad_defined_inline,
    as_tensor,
    check_broadcast,
    check_same_device,
    data_of,
    dtype_name,
    elementwise,
    mask_of,
    modified_message,
    operand_arrays,
    record,
)

_multiply = np.multiply


def _product_1d(g: Tensor, gd: np.ndarray, x: Any) -> Tensor:
    """``elementwise(g, x, np.multiply)`` where ``g``'s array ``gd`` is 1-dim, float32 or
    float64, and NumPy's errors are ignored already: for ``x`` a tensor of the same shape,
    dtype and device, or a Python float, the product is a fresh 1-dim array, laid out as
    TensorIterator lays it (contiguous), in ``g``'s dtype, whatever the operands' strides;
    anything else is ``elementwise``'s."""
    if type(x) is Tensor:
        xd = x.data
        # (1-dim both: equal lengths are equal shapes, without building the shape tuples)
        if (type(xd) is np.ndarray and xd.dtype == gd.dtype and xd.ndim == 1
                and len(xd) == len(gd) and x.device == g.device):
            data = _multiply(gd, xd)
        else:
            return elementwise(g, x, _multiply)
    elif type(x) is float:
        data = _multiply(gd, x)
    else:
        return elementwise(g, x, _multiply)
    return _tensor_of(data, g.device)


# The formulas below run once per node in most backward passes: each checks
# ``any_grad_defined`` itself (``base._any_grad_defined_inline``), and ``add``'s and
# ``mul``'s read ``should_compute_output`` off the edges inline.
class AddBackward0(OpNode):
    @_any_grad_defined_inline
    def apply(self, grads: Grads) -> Grads:
        g = grads[0]
        if g is None:
            return [None] * len(self._next_edges)
        e0, e1 = self._next_edges
        return [g if e0.function is not None else None, g if e1.function is not None else None]


class SubBackward0(OpNode):
    @_any_grad_defined_inline
    def apply(self, grads: Grads) -> Grads:
        g = grads[0]
        if g is None:
            return [None] * len(self._next_edges)
        return [g if self.should_compute_output(0) else None,
                neg(g) if self.should_compute_output(1) else None]


class RsubBackward1(OpNode):
    @_any_grad_defined_inline
    def apply(self, grads: Grads) -> Grads:
        g = grads[0]
        if g is None:
            return [None] * len(self._next_edges)
        return [neg(g)]


class MulBackward0(OpNode):
    @_any_grad_defined_inline
    def apply(self, grads: Grads) -> Grads:
        g = grads[0]
        if g is None:
            return [None] * len(self._next_edges)
        # self.saved(), inlined (OpNode.saved: the saved tensors' versions checked)
        if self._released:
            raise RuntimeError(SAVED_FREED)
        s = self._saved or {}
        for k, version, is_output in self._saved_versions:
            vc = s[k]._version_counter
            if (0 if vc is None else vc.version) != version:
                raise RuntimeError(modified_message(self, s[k], version, is_output))
        e0, e1 = self._next_edges
        if not getattr(_grad_tls, "enabled", True):
            # mul() without grad mode (a backward pass without create_graph), inlined: the
            # saved operands passed mul's checks already, and nothing is recorded.
            gd = g.data
            if type(gd) is np.ndarray and gd.ndim == 1 and gd.dtype.char in "df" \
                    and _errstate is not None and _errstate.get() in _ignoring:
                # (errors_ignored(), inlined)
                return [_product_1d(g, gd, s["other"]) if e0.function is not None else None,
                        _product_1d(g, gd, s["self"]) if e1.function is not None else None]
            return [elementwise(g, s["other"], _multiply) if e0.function is not None else None,
                    elementwise(g, s["self"], _multiply) if e1.function is not None else None]
        return [mul(g, s["other"]) if e0.function is not None else None,
                mul(g, s["self"]) if e1.function is not None else None]


class DivBackward0(OpNode):
    @_any_grad_defined_inline
    def apply(self, grads: Grads) -> Grads:
        g = grads[0]
        if g is None:
            return [None] * len(self._next_edges)
        s = self.saved()
        a, b = s["self"], s["other"]
        ga = div(g, b) if self.should_compute_output(0) else None
        gb = None
        if self.should_compute_output(1):
            gb = neg(div(mul(g, a), mul(b, b)))
        return [ga, gb]


class NegBackward0(OpNode):
    @_any_grad_defined_inline
    def apply(self, grads: Grads) -> Grads:
        g = grads[0]
        if g is None:
            return [None] * len(self._next_edges)
        return [neg(g)]


def _wrap(x: Any) -> Any:
    """An operand: a Tensor, or a Python or NumPy scalar (a constant)."""
    if isinstance(x, (Tensor, int, float, bool, np.number)):
        return x
    raise TypeError(f"unsupported operand type: {type(x).__name__}")


def _binary(a: Tensor, b: Any, np_fn: Any, node_cls: type[OpNode],
            saved: dict[str, Any] | None = None, dtype: Any = None) -> Tensor:
    b = _wrap(b)
    return record(elementwise(a, b, np_fn, dtype), node_cls, (a, b), saved)


def _check_sub(a: Any, b: Any) -> None:
    """``sub_check``: no subtraction with a bool operand (a Python bool included)."""
    a_bool, b_bool = (x.dtype == np.bool_ if isinstance(x, Tensor) else
                      isinstance(x, (bool, np.bool_)) for x in (a, b))
    if a_bool and b_bool:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    if a_bool or b_bool:
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not "
                           "supported. If you are trying to invert a mask, use the `~` or "
                           "`logical_not()` operator instead.")


def add(a: Tensor, b: Any) -> Tensor:
    return _binary(a, b, np.add, AddBackward0)


def sub(a: Tensor, b: Any) -> Tensor:
    if a.dtype.kind == "b" or isinstance(b, (bool, np.bool_)) or (
            isinstance(b, Tensor) and b.dtype.kind == "b"):
        _check_sub(a, b)
    return _binary(a, b, np.subtract, SubBackward0)


def rsub(a: Tensor, b: Any) -> Tensor:
    """``b - a`` for a scalar ``b``: ``RsubBackward1`` with a single edge."""
    # ATen: sub(wrapped_scalar(b), a): the scalar is the first operand
    if a.dtype.kind == "b" or isinstance(b, (bool, np.bool_)):
        _check_sub(b, a)
    y, x, comp = operand_arrays(a, b, dt := binary_result_type(a, b))
    with np.errstate(all="ignore"):
        data = np.subtract(x, y)
    if comp != dt:
        data = data.astype(dt)
    out = as_tensor(elementwise_layout(data, data_of(b), a.data), a.device)
    return record(out, RsubBackward1, (a,))


def mul(a: Tensor, b: Any) -> Tensor:
    if type(b) is not Tensor:  # called once per node in most backward passes
        b = _wrap(b)
    if not grad_mode.is_grad_enabled():  # nothing to record (a backward pass, usually)
        return elementwise(a, b, np.multiply)
    if a.requires_grad or getattr(b, "requires_grad", 0):
        return _binary(a, b, np.multiply, MulBackward0, {"self": a, "other": b})
    return _binary(a, b, np.multiply, MulBackward0)


def div(a: Tensor, b: Any) -> Tensor:
    b = _wrap(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _binary(a, b, np.divide, DivBackward0, {"self": a, "other": b},
                       float_result_type(a, b))


def neg(a: Tensor) -> Tensor:
    if a.data.dtype == np.bool_:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. "
                           "If you are trying to invert a mask, use the `~` or "
                           "`logical_not()` operator instead.")
    out = as_tensor(elementwise_layout(np.negative(a.data), a.data), a.device)
    return record(out, NegBackward0, (a,))


def where_const(mask: Any, t: Tensor, value: float) -> Tensor:
    """``where(mask, value, t)`` with a constant mask: a multiply, so it stays differentiable."""
    xp = _dev.array_module(t.data)
    mask = xp.asarray(mask)
    if not mask.any():
        return t
    keep = xp.where(mask, 0.0, 1.0).astype(t.dtype)
    out = mul(t, as_tensor(keep, t.device))
    if value != 0.0:
        out = add(out, as_tensor(xp.where(mask, value, 0.0).astype(t.dtype), t.device))
    return out


def zeros_like_t(t: Tensor) -> Tensor:
    """``at::zeros_like`` without a node."""
    with _dev.on_device(t.device):
        return as_tensor(_dev.array_module(t.data).zeros_like(t.data), t.device)


# --- maximum, minimum, where --------------------------------------------------------
class MaximumBackward0(OpNode):
    """Ties split the gradient in half, as ``at::maximum``'s formula does."""

    is_max: bool

    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        a, b = s["self"], s["other"]
        g = grads[0]
        sign = 1 if self.is_max else -1
        gt = (a.data - b.data) * sign > 0
        eq = a.data == b.data
        wa = gt.astype(g.dtype) + eq.astype(g.dtype) * 0.5
        wb = (~gt & ~eq).astype(g.dtype) + eq.astype(g.dtype) * 0.5
        return [mul(g, as_tensor(wa, g.device)) if self.should_compute_output(0) else None,
                mul(g, as_tensor(wb, g.device)) if self.should_compute_output(1) else None]


class MinimumBackward0(MaximumBackward0):
    pass


def _extremum(a: Tensor, b: Tensor, is_max: bool) -> Tensor:
    dev = check_same_device(a, b)
    check_broadcast(a, b)
    fn = np.maximum if is_max else np.minimum
    x, y, comp = operand_arrays(a, b, dt := result_type(a, b))
    data = fn(x, y)
    out = as_tensor(elementwise_layout(data if comp == dt else data.astype(dt), a.data, b.data),
                    dev)
    node = MaximumBackward0 if is_max else MinimumBackward0
    return record(out, node, (a, b), {"self": a, "other": b}, is_max=is_max)


def maximum(a: Tensor, b: Tensor) -> Tensor:
    return _extremum(a, b, True)


def minimum(a: Tensor, b: Tensor) -> Tensor:
    return _extremum(a, b, False)


class WhereBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        cond = self.saved()["condition"]
        g = grads[0]
        xp = _dev.array_module(cond.data)
        c = xp.broadcast_to(cond.data, g.shape)
        ga = mul(g, mask_of(c, g)) if self.should_compute_output(0) else None
        gb = mul(g, mask_of(~c, g)) if self.should_compute_output(1) else None
        return [ga, gb]


def where(condition: Tensor, a: Any, b: Any) -> Tensor:
    """``torch.where(condition, a, b)``; a Python scalar operand is a constant."""
    cond = condition.data
    if cond.dtype != np.bool_:
        raise RuntimeError(
            f"where expected condition to be a boolean tensor, but got a tensor with dtype "
            f"{dtype_name(cond.dtype)}")
    xp = _dev.array_module(cond, data_of(a), data_of(b))
    dt = result_type(a, b)
    ad, bd = ((x.data if x.dtype == dt else x.data.astype(dt)) if isinstance(x, Tensor)
              else xp.asarray(x, dtype=dt) for x in (a, b))
    dev = check_same_device(condition, *[t for t in (a, b) if isinstance(t, Tensor)])
    data = xp.where(cond, ad, bd)
    out = as_tensor(elementwise_layout(data, cond, ad, bd), dev)
    return record(out, WhereBackward0, (a, b), {"condition": condition})


# --- comparisons: no gradient (a bool result) ------------------------------------------
def compare(a: Tensor, b: Any, np_fn: Any) -> Tensor:
    """``a < b`` and the like, as Tensor's operators call it (no broadcast check), in the
    operands' result type."""
    x, y, _ = operand_arrays(a, b, binary_result_type(a, b))
    return as_tensor(np_fn(x, y), a.device)


def _compare(a: Tensor, b: Any, fn: Any) -> Tensor:
    check_broadcast(a, b)
    return compare(a, b, fn)


def eq(a: Tensor, b: Any) -> Tensor:
    return _compare(a, b, np.equal)


def ne(a: Tensor, b: Any) -> Tensor:
    return _compare(a, b, np.not_equal)


def lt(a: Tensor, b: Any) -> Tensor:
    return _compare(a, b, np.less)


def le(a: Tensor, b: Any) -> Tensor:
    return _compare(a, b, np.less_equal)


def gt(a: Tensor, b: Any) -> Tensor:
    return _compare(a, b, np.greater)


def ge(a: Tensor, b: Any) -> Tensor:
    return _compare(a, b, np.greater_equal)
