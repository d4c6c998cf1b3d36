"""The ops that backward formulas call, so that a double backward (``create_graph=True``)
records PyTorch's nodes: the ``Scalar`` overloads (``mul(Tensor, Scalar)``:
``MulBackward1``, ``sub(Tensor, Scalar)``: ``SubBackward1``), ``sgn`` (``SgnBackward0``),
and ATen's ``*_backward`` functions, which are ops with their own derivatives
(``sigmoid_backward``: ``SigmoidBackwardBackward0``, ``tanh_backward``:
``TanhBackwardBackward0``, ``threshold_backward``: ``ThresholdBackwardBackward0``).

Mirrors ``at::mul(Tensor, Scalar)``, ``at::sgn``, ``at::masked_fill(Tensor value)``,
``at::sigmoid_backward``, ``at::tanh_backward``, ``at::threshold_backward`` and their
``derivatives.yaml`` entries (``grad_output``'s formula is the op itself; ``output``'s, or
``self``'s, is written out).

Departures: none for real tensors (``sgn`` of a complex number is not modelled).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import device as _dev
from ..strides import elementwise_layout
from ..tensor import Tensor
from .arith import mul, where, zeros_like_t
from .base import Grads, OpNode, as_tensor, record
from .reduction import sum


def _out(data: Any, like: Tensor, *operands: Any) -> Tensor:
    if data.dtype != like.dtype:
        data = data.astype(like.dtype)
    return as_tensor(elementwise_layout(data, *operands), like.device)


# --- mul(Tensor, Scalar), sgn ---------------------------------------------------------
class MulBackward1(OpNode):
    """``mul(self, other: Scalar)``: one edge, the scalar kept as a field."""

    other: float

    def apply(self, grads: Grads) -> Grads:
        return [mul_scalar(grads[0], self.other)]


def mul_scalar(a: Tensor, other: float) -> Tensor:
    """``at::mul(Tensor, Scalar)``, as a C++ formula writes ``2 * result``."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = _out(np.multiply(a.data, other), a, a.data)
    return record(out, MulBackward1, (a,), other=other)


class SubBackward1(OpNode):
    """``sub(self, other: Scalar)``: one edge."""

    def apply(self, grads: Grads) -> Grads:
        return [grads[0]]


def sub_scalar(a: Tensor, other: float) -> Tensor:
    """``at::sub(Tensor, Scalar)``, as a C++ formula writes ``exponent - 1``."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = _out(np.subtract(a.data, other), a, a.data)
    return record(out, SubBackward1, (a,))


class SgnBackward0(OpNode):
    """``sgn_backward``: zero for a real tensor."""

    def apply(self, grads: Grads) -> Grads:
        return [zeros_like_t(grads[0])]


def sgn(a: Tensor) -> Tensor:
    return record(_out(np.sign(a.data), a, a.data), SgnBackward0, (a,))


# --- the *_backward ops ---------------------------------------------------------------
class SigmoidBackwardBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        gg, grad_output, output = grads[0], s["grad_output"], s["output"]
        return [sigmoid_backward(gg, output) if self.should_compute_output(0) else None,
                mul(mul(gg, grad_output), mul_scalar(output, -2.0) + 1.0)
                if self.should_compute_output(1) else None]


def sigmoid_backward(grad_output: Tensor, output: Tensor) -> Tensor:
    """``grad_output * (1 - output) * output``."""
    out = _out(grad_output.data * (1 - output.data) * output.data, output,
               grad_output.data, output.data)
    return record(out, SigmoidBackwardBackward0, (grad_output, output),
                  {"grad_output": grad_output, "output": output})


class TanhBackwardBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        gg, grad_output, output = grads[0], s["grad_output"], s["output"]
        return [tanh_backward(gg, output) if self.should_compute_output(0) else None,
                mul(mul(mul_scalar(output, -2.0), gg), grad_output)
                if self.should_compute_output(1) else None]


def tanh_backward(grad_output: Tensor, output: Tensor) -> Tensor:
    """``grad_output * (1 - output ** 2)``."""
    out = _out(grad_output.data * (1 - output.data * output.data), output,
               grad_output.data, output.data)
    return record(out, TanhBackwardBackward0, (grad_output, output),
                  {"grad_output": grad_output, "output": output})


class ThresholdBackwardBackward0(OpNode):
    threshold: float

    def apply(self, grads: Grads) -> Grads:
        gg = grads[0]
        return [threshold_backward(gg, self.saved()["self"], self.threshold)
                if self.should_compute_output(0) else None,
                zeros_like_t(gg) if self.should_compute_output(1) else None]


def threshold_backward(grad_output: Tensor, a: Tensor, threshold: float) -> Tensor:
    """``grad_output`` where ``self > threshold``, else 0 (``relu``'s backward with
    ``self = result``)."""
    xp = _dev.array_module(grad_output.data)
    data = xp.where(a.data <= threshold, 0, grad_output.data)
    out = _out(data, grad_output, grad_output.data, a.data)
    return record(out, ThresholdBackwardBackward0, (grad_output, a), {"self": a},
                  threshold=threshold)


# --- masked_fill with a 0-dim Tensor value ------------------------------------------------
class MaskedFillBackward1(OpNode):
    """``masked_fill(mask, value: Tensor)``: ``self`` gets the gradient off the mask,
    ``value`` the sum of it on the mask."""

    def apply(self, grads: Grads) -> Grads:
        g, mask = grads[0], self.saved()["mask"]
        zero = as_tensor(_dev.array_module(g.data).zeros((), dtype=g.dtype), g.device)
        return [where(mask, zero, g) if self.should_compute_output(0) else None,
                sum(where(mask, g, zero)) if self.should_compute_output(1) else None]


def masked_fill_tensor(a: Tensor, mask: Tensor, value: Tensor) -> Tensor:
    """``at::masked_fill(self, mask, value)`` with a 0-dim tensor ``value``, as
    ``evenly_distribute_backward`` (``MaxBackward1``'s formula) calls it."""
    xp = _dev.array_module(a.data)
    out = _out(xp.where(mask.data, value.data, a.data), a, a.data)
    return record(out, MaskedFillBackward1, (a, value), {"mask": mask})
