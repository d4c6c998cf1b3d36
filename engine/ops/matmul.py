"""Matrix products (``mm``, ``dot``, ``mv``, ``matmul``) and ``linear``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import grad_mode
from ..graph import Node
from ..strides import (
    contiguous,
)
from ..tensor import Tensor
from .arith import mul
from .base import (
    Grads,
    OpNode,
    _check_same_device,
    _new,
    _record,
)
from .shape import _squeeze0, _unsqueeze0, reshape, t


# --- matrix products -----------------------------------------------------------
class MmBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        g = grads[0]
        return [mm(g, t(s["mat2"])) if self.should_compute_output(0) else None,
                mm(t(s["self"]), g) if self.should_compute_output(1) else None]


class DotBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        g = grads[0]
        return [mul(s["tensor"], g) if self.should_compute_output(0) else None,
                mul(s["self"], g) if self.should_compute_output(1) else None]


class MvBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        g = grads[0]
        ga = gb = None
        if self.should_compute_output(0):
            ga = mm(reshape(g, (-1, 1)), reshape(s["vec"], (1, -1)))
        if self.should_compute_output(1):
            gb = mv(t(s["self"]), g)
        return [ga, gb]


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


# --- linear --------------------------------------------------------------------
class LinearBackward0(OpNode):
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
