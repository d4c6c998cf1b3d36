"""The unary pointwise ops: ``exp``, ``log``, ``reciprocal``, ``relu``, ``sigmoid``,
``tanh``, ``sqrt``, ``abs``, ``sin``, ``cos``, ``square``, ``clamp``, ``masked_fill``, and the
powers (``pow``, ``rpow``), each with its backward node.

Mirrors ATen's unary ops and their ``derivatives.yaml`` formulas, written with Tensor ops
(``arith.py``) so a double backward records: a node saves ``result`` where PyTorch's does
(``exp``, ``sqrt``, ``sigmoid``, ``tanh``, ...) and ``self`` where it does (``log``, ``abs``,
``sin``, ``cos``).  ``square`` is ``pow(self, 2)`` (``PowBackward0``), as in ATen.

The formulas call the ops PyTorch's call (``grad_ops.py``: ``sigmoid_backward``,
``tanh_backward``, ``threshold_backward``, ``sgn``, ``mul`` by a Scalar), so a double
backward records PyTorch's nodes.

Departures: ``t ** t`` sits here, with the other powers, because its gradient
needs ``log``; unary minus is the operator ``neg`` in ``arith.py``.  Masks are constants,
made with their operand's array module on its device.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import device as _dev
from ..dtypes import default_dtype, result_type
from ..strides import contiguous, elementwise_layout
from ..tensor import Tensor
from .arith import div, mul, neg, where, where_const, zeros_like_t
from .base import (
    Grads,
    OpNode,
    as_tensor,
    check_broadcast,
    check_same_device,
    mask_of,
    operand_arrays,
    record,
)
from .grad_ops import (
    mul_scalar,
    sgn,
    sigmoid_backward,
    sub_scalar,
    tanh_backward,
    threshold_backward,
)


class ExpBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [mul(grads[0], self.saved()["result"])]


class LogBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [div(grads[0], self.saved()["self"])]


class ReciprocalBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        r = self.saved()["result"]
        return [mul(neg(grads[0]), mul(r, r))]


class ReluBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [threshold_backward(grads[0], self.saved()["result"], 0)]


class SigmoidBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [sigmoid_backward(grads[0], self.saved()["result"])]


class TanhBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [tanh_backward(grads[0], self.saved()["result"])]


class SqrtBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [div(grads[0], mul_scalar(self.saved()["result"], 2.0))]


class AbsBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [mul(grads[0], sgn(self.saved()["self"]))]


class SinBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [mul(grads[0], cos(self.saved()["self"]))]


class CosBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [mul(grads[0], neg(sin(self.saved()["self"])))]


def _unary(a: Tensor, fn: Any, node_cls: type[OpNode], save: str) -> Tensor:
    """``fn`` elementwise; the node saves ``result`` or ``self``, as PyTorch's does."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = as_tensor(elementwise_layout(fn(a.data), a.data), a.device)
    return record(out, node_cls, (a,), {save: out if save == "result" else a})


def exp(a: Tensor) -> Tensor:
    return _unary(a, np.exp, ExpBackward0, "result")


def log(a: Tensor) -> Tensor:
    return _unary(a, np.log, LogBackward0, "self")


def reciprocal(a: Tensor) -> Tensor:
    """An integer or bool tensor's reciprocal has the default float dtype, as in PyTorch."""
    return _unary(a, lambda x: np.reciprocal(
        x if x.dtype.kind == "f" else x.astype(default_dtype())), ReciprocalBackward0, "result")


def relu(a: Tensor) -> Tensor:
    return _unary(a, lambda x: np.maximum(x, 0).astype(x.dtype), ReluBackward0, "result")


def sigmoid(a: Tensor) -> Tensor:
    return _unary(a, lambda x: 1.0 / (1.0 + np.exp(-x)), SigmoidBackward0, "result")


def tanh(a: Tensor) -> Tensor:
    return _unary(a, np.tanh, TanhBackward0, "result")


def sqrt(a: Tensor) -> Tensor:
    return _unary(a, np.sqrt, SqrtBackward0, "result")


def abs(a: Tensor) -> Tensor:  # noqa: A001 - torch's name
    return _unary(a, np.abs, AbsBackward0, "self")


def sin(a: Tensor) -> Tensor:
    return _unary(a, np.sin, SinBackward0, "self")


def cos(a: Tensor) -> Tensor:
    return _unary(a, np.cos, CosBackward0, "self")


# --- powers ----------------------------------------------------------------------
def _zero(like: Tensor) -> Tensor:
    """``at::zeros({}, grad.options())``: a 0-dim zero, a constant."""
    return as_tensor(_dev.array_module(like.data).zeros((), dtype=like.dtype), like.device)


class PowBackward0(OpNode):
    """``t ** scalar``: ``pow_backward``."""

    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        e = s["exponent"]
        if e == 0:
            return [zeros_like_t(grads[0])]
        return [mul(grads[0], mul_scalar(pow(s["self"], e - 1), e))]


class PowBackward1(OpNode):
    """``t ** t``: ``pow_backward_self`` and ``pow_backward_exponent``."""

    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        g, a, e, result = grads[0], s["self"], s["exponent"], s["result"]
        ga = gb = None
        zero = _zero(g)
        if self.should_compute_output(0):  # pow_backward_self
            ga = where(as_tensor(e.data == 0, e.device), zero,
                       mul(g, mul(e, pow(a, sub_scalar(e, 1)))))
        if self.should_compute_output(1):  # pow_backward_exponent
            mask = (a.data == 0) & (e.data >= 0)
            with np.errstate(divide="ignore", invalid="ignore"):
                gb = mul(g, where(as_tensor(mask, a.device), zero, mul(result, log(a))))
        return [ga, gb]


class PowBackward2(OpNode):
    """``scalar ** t``."""

    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        base, e, result = s["base"], s["exponent"], s["result"]
        if base == 0:
            return [where_const(e.data >= 0, mul(grads[0], 0.0), 0.0)]
        return [mul(grads[0], mul_scalar(result, float(np.log(base))))]


def _power(a: Tensor, e: Any, base_first: bool = True) -> Any:
    """``a ** e`` (or ``e ** a``) in PyTorch's result type of the two; integers to negative
    integer powers as ATen's integer ``pow`` gives them (1, -1 or 0)."""
    dt = result_type(a, e)
    if base_first and not isinstance(e, Tensor) and e in (0, 1):
        # pow_Tensor_Scalar_out: an exponent of 0 fills ones, 1 copies (bool ** True too)
        x = a.data if e else _dev.array_module(a.data).ones_like(a.data)
        return x.astype(dt)
    if dt == np.bool_:
        raise NotImplementedError("\"pow\" not implemented for 'Bool'")
    if dt.kind in "iu" and not isinstance(e, Tensor) and base_first and e < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    x, y, comp = operand_arrays(a, e, dt)
    if not base_first:
        x, y = y, x
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if dt.kind in "iu" and (np.asarray(y) < 0).any():
            xp = _dev.array_module(x, y)
            neg_e = xp.asarray(y) < 0
            data = np.power(x, xp.where(neg_e, 0, y))
            odd = xp.where(np.remainder(y, 2) != 0, -1, 1)
            at_neg = xp.where(x == 1, 1, xp.where(x == -1, odd, 0))
            return xp.where(neg_e, at_neg, data).astype(dt)
        data = np.power(x, y)
    return data if comp == dt else data.astype(dt)


def pow(a: Tensor, e: Any) -> Tensor:  # noqa: A001 - torch's name
    if isinstance(e, Tensor):
        dev = check_same_device(a, e)
        check_broadcast(a, e)
        out = as_tensor(elementwise_layout(_power(a, e), a.data, e.data), dev)
        return record(out, PowBackward1, (a, e), {"self": a, "exponent": e, "result": out})
    out = as_tensor(elementwise_layout(_power(a, e), a.data), a.device)
    return record(out, PowBackward0, (a,), {"self": a, "exponent": e})


def rpow(a: Tensor, base: Any) -> Tensor:
    """``base ** a`` for a scalar base."""
    with np.errstate(divide="ignore", invalid="ignore"):
        # pow(Scalar, Tensor)'s meta function allocates a contiguous output
        out = as_tensor(contiguous(_power(a, base, base_first=False)), a.device)
    return record(out, PowBackward2, (a,), {"base": base, "exponent": a, "result": out})


def square(a: Tensor) -> Tensor:
    """``torch.square`` is ``pow(self, 2)``: ``PowBackward0``."""
    return pow(a, 2)


# --- clamp, masked_fill: the gradient passes where the value is kept -----------------
class ClampBackward1(OpNode):
    """``clamp(min, max)`` with scalars: the gradient passes where min <= x <= max."""

    min: float | None
    max: float | None

    def apply(self, grads: Grads) -> Grads:
        a = self.saved()["self"]
        lo, hi = self.min, self.max
        xp = _dev.array_module(a.data)
        keep = xp.ones_like(a.data, dtype=bool) if lo is None else a.data >= lo
        if hi is not None:
            keep = keep & (a.data <= hi)
        return [where(as_tensor(keep, a.device), grads[0], _zero(grads[0]))]


def clamp(a: Tensor, min: float | None = None, max: float | None = None) -> Tensor:  # noqa: A002
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    xp = _dev.array_module(a.data)
    data = a.data
    if min is not None:
        data = xp.maximum(data, min)
    if max is not None:
        data = xp.minimum(data, max)
    out = as_tensor(elementwise_layout(data.astype(a.dtype), a.data), a.device)
    return record(out, ClampBackward1, (a,), {"self": a}, min=min, max=max)


class MaskedFillBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        mask = self.saved()["mask"]
        g = grads[0]
        xp = _dev.array_module(mask.data)
        return [mul(g, mask_of(~xp.broadcast_to(mask.data, g.shape), g))]


def masked_fill(a: Tensor, mask: Tensor, value: float) -> Tensor:
    if mask.dtype != np.bool_:
        raise RuntimeError(
            f"masked_fill_ only supports boolean masks, but got mask with dtype "
            f"{np.dtype(mask.dtype).name}")
    xp = _dev.array_module(a.data, mask.data)
    data = xp.where(mask.data, xp.asarray(value, dtype=a.dtype), a.data).astype(a.dtype)
    out = as_tensor(elementwise_layout(data, a.data), a.device)
    return record(out, MaskedFillBackward0, (a,), {"mask": mask})
