"""More pointwise ops: ``sqrt``, ``abs``, ``sin``, ``cos``, ``square``, ``clamp``,
``maximum``/``minimum``, ``where``, ``masked_fill`` and the comparisons, each with its
``derivatives.yaml`` formula, written with Tensor ops (so double backward records).

Masks are constants (a comparison has no gradient); where a formula multiplies by a
mask, the mask is a Tensor made with its operand's array module, on its device.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import device as _dev
from .. import grad_mode
from ..strides import elementwise_layout
from ..tensor import Tensor
from .arith import _unary, div, mul, neg, pow
from .base import Grads, OpNode, _check_broadcast, _check_same_device, _data, _new, _record


def _mask(cond: Any, like: Tensor) -> Tensor:
    """A 0/1 Tensor of ``like``'s dtype: ``cond`` as a constant factor."""
    return _new(cond.astype(like.dtype), like.device)


class SqrtBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [div(grads[0], mul(self.saved()["result"], 2.0))]


class AbsBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        a = self.saved()["self"]
        return [mul(grads[0], _new(np.sign(a.data), a.device))]


class SinBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [mul(grads[0], cos(self.saved()["self"]))]


class CosBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [mul(grads[0], neg(sin(self.saved()["self"])))]


def sqrt(a: Tensor) -> Tensor:
    return _unary(a, np.sqrt, SqrtBackward0, "result")


def abs(a: Tensor) -> Tensor:  # noqa: A001 - torch's name
    return _unary(a, np.abs, AbsBackward0, "self")


def sin(a: Tensor) -> Tensor:
    return _unary(a, np.sin, SinBackward0, "self")


def cos(a: Tensor) -> Tensor:
    return _unary(a, np.cos, CosBackward0, "self")


def square(a: Tensor) -> Tensor:
    """``torch.square`` is ``pow(self, 2)``: ``PowBackward0``."""
    return pow(a, 2)


class ClampBackward1(OpNode):
    """``clamp(min, max)`` with scalars: the gradient passes where min <= x <= max."""

    def apply(self, grads: Grads) -> Grads:
        a = self.saved()["self"]
        lo, hi = self._min, self._max
        xp = _dev.array_module(a.data)
        keep = xp.ones_like(a.data, dtype=bool) if lo is None else a.data >= lo
        if hi is not None:
            keep = keep & (a.data <= hi)
        return [mul(grads[0], _mask(keep, grads[0]))]


def clamp(a: Tensor, min: float | None = None, max: float | None = None) -> Tensor:  # noqa: A002
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    xp = _dev.array_module(a.data)
    data = a.data
    if min is not None:
        data = xp.maximum(data, min)
    if max is not None:
        data = xp.minimum(data, max)
    out = _new(elementwise_layout(data.astype(a.dtype), a.data), a.device)
    need = grad_mode.is_grad_enabled() and a.requires_grad
    out = _record(out, ClampBackward1, (a,), **({"self": a} if need else {}))
    if out.grad_fn is not None:
        out.grad_fn._min, out.grad_fn._max = min, max  # type: ignore[attr-defined]
    return out


class MaximumBackward0(OpNode):
    """Ties split the gradient in half, as ``at::maximum``'s formula does."""

    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        a, b = s["self"], s["other"]
        g = grads[0]
        sign = 1 if self._is_max else -1
        gt = (a.data - b.data) * sign > 0
        eq = a.data == b.data
        wa = gt.astype(g.dtype) + eq.astype(g.dtype) * 0.5
        wb = (~gt & ~eq).astype(g.dtype) + eq.astype(g.dtype) * 0.5
        return [mul(g, _new(wa, g.device)) if self.should_compute_output(0) else None,
                mul(g, _new(wb, g.device)) if self.should_compute_output(1) else None]


class MinimumBackward0(MaximumBackward0):
    pass


def _extremum(a: Tensor, b: Tensor, is_max: bool) -> Tensor:
    dev = _check_same_device(a, b)
    _check_broadcast(a, b)
    fn = np.maximum if is_max else np.minimum
    out = _new(elementwise_layout(fn(a.data, b.data), a.data, b.data), dev)
    need = grad_mode.is_grad_enabled() and (a.requires_grad or b.requires_grad)
    node = MaximumBackward0 if is_max else MinimumBackward0
    out = _record(out, node, (a, b), **({"self": a, "other": b} if need else {}))
    if out.grad_fn is not None:
        out.grad_fn._is_max = is_max  # type: ignore[attr-defined]
    return out


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
        ga = mul(g, _mask(c, g)) if self.should_compute_output(0) else None
        gb = mul(g, _mask(~c, g)) if self.should_compute_output(1) else None
        return [ga, gb]


def where(condition: Tensor, a: Any, b: Any) -> Tensor:
    """``torch.where(condition, a, b)``; a Python scalar operand is a constant."""
    cond = condition.data
    if cond.dtype != np.bool_:
        raise RuntimeError(
            f"where expected condition to be a boolean tensor, but got a tensor with dtype "
            f"{_torch_dtype_name(cond.dtype)}")
    like = a if isinstance(a, Tensor) else b
    xp = _dev.array_module(cond, _data(a), _data(b))
    ad, bd = _data(a), _data(b)
    if not isinstance(a, Tensor):
        ad = xp.asarray(a, dtype=like.dtype) if isinstance(like, Tensor) else a
    if not isinstance(b, Tensor):
        bd = xp.asarray(b, dtype=like.dtype) if isinstance(like, Tensor) else b
    dev = _check_same_device(condition, *[t for t in (a, b) if isinstance(t, Tensor)])
    data = xp.where(cond, ad, bd)
    out = _new(elementwise_layout(data, cond, ad, bd), dev)
    need = grad_mode.is_grad_enabled() and any(
        isinstance(t, Tensor) and t.requires_grad for t in (a, b))
    return _record(out, WhereBackward0, (a, b), **({"condition": condition} if need else {}))


def _torch_dtype_name(dtype: Any) -> str:
    return {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int",
            "bool": "Bool", "float16": "Half"}.get(np.dtype(dtype).name, str(dtype))


class MaskedFillBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        mask = self.saved()["mask"]
        g = grads[0]
        xp = _dev.array_module(mask.data)
        return [mul(g, _mask(~xp.broadcast_to(mask.data, g.shape), g))]


def masked_fill(a: Tensor, mask: Tensor, value: float) -> Tensor:
    if mask.dtype != np.bool_:
        raise RuntimeError(
            f"masked_fill_ only supports boolean masks, but got mask with dtype "
            f"{np.dtype(mask.dtype).name}")
    xp = _dev.array_module(a.data, mask.data)
    data = xp.where(mask.data, xp.asarray(value, dtype=a.dtype), a.data).astype(a.dtype)
    out = _new(elementwise_layout(data, a.data), a.device)
    need = grad_mode.is_grad_enabled() and a.requires_grad
    return _record(out, MaskedFillBackward0, (a,), **({"mask": mask} if need else {}))


# --- comparisons: no gradient (a bool result) ------------------------------------------
def _compare(a: Tensor, b: Any, fn: Any) -> Tensor:
    _check_broadcast(a, b)
    return _new(fn(a.data, _data(b)), a.device)


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
