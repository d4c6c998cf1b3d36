"""Pointwise ops: arithmetic, powers, comparisons and unary functions, each with
its backward node (``derivatives.yaml``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import device as _dev
from .. import grad_mode
from ..graph import Node
from ..strides import (
    contiguous,
    elementwise_layout,
)
from ..tensor import Tensor
from .base import (
    Grads,
    OpNode,
    _check_broadcast,
    _check_same_device,
    _computes,
    _data,
    _elementwise,
    _new,
    _record,
    _wrap,
)


class AddBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        g = grads[0]
        c0, c1 = _computes(self)
        return [g if c0 else None, g if c1 else None]


class SubBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        g = grads[0]
        return [g if self.should_compute_output(0) else None,
                neg(g) if self.should_compute_output(1) else None]


class RsubBackward1(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [neg(grads[0])]


class MulBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        g = grads[0]
        c0, c1 = _computes(self)
        return [mul(g, s["other"]) if c0 else None, mul(g, s["self"]) if c1 else None]


class DivBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        g, a, b = grads[0], s["self"], s["other"]
        ga = div(g, b) if self.should_compute_output(0) else None
        gb = None
        if self.should_compute_output(1):
            gb = neg(div(mul(g, a), mul(b, b)))
        return [ga, gb]


class NegBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [neg(grads[0])]


class PowBackward0(OpNode):
    """``t ** scalar``: ``pow_backward``."""

    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        e = s["exponent"]
        if e == 0:
            return [zeros_like_t(grads[0])]
        return [mul(grads[0], mul(pow(s["self"], e - 1), e))]


class PowBackward1(OpNode):
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


class PowBackward2(OpNode):
    """``scalar ** t``."""

    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        base, e, result = s["base"], s["exponent"], s["result"]
        if base == 0:
            return [where_const(e.data >= 0, mul(grads[0], 0.0), 0.0)]
        return [mul(mul(grads[0], result), float(np.log(base)))]


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
class ExpBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [mul(grads[0], self.saved()["result"])]


class LogBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [div(grads[0], self.saved()["self"])]


class ReciprocalBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        r = self.saved()["result"]
        return [neg(mul(grads[0], mul(r, r)))]


class ReluBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        r = self.saved()["result"]
        return [mul(grads[0], _new((r.data > 0).astype(r.dtype), r.device))]


class SigmoidBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        r = self.saved()["result"]
        return [mul(grads[0], mul(r, rsub(r, 1.0)))]


class TanhBackward0(OpNode):
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
