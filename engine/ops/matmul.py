"""Matrix products: ``mm``, ``dot``, ``mv`` and ``matmul``, which picks one of them by the
operands' dims as ``at::matmul`` does.

Mirrors ``at::mm``, ``at::dot``, ``at::mv`` (``MmBackward0``, ``DotBackward0``,
``MvBackward0``, their ``derivatives.yaml`` formulas) and ``at::matmul``: a 1-D @ 2-D
product is ``a.unsqueeze(0).mm(b).squeeze_(0)`` (``UnsqueezeBackward0``, ``MmBackward0``,
``SqueezeBackward4``), with PyTorch's shape errors.

Departures: operands of more than two dims (batched matmul) are refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..strides import as_strided, contiguous, element_strides
from ..tensor import Tensor
from .arith import mul
from .base import Grads, OpNode, as_tensor, check_same_device, record
from .shape import reshape
from .views import t, unsqueeze


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


def _mat(a: Tensor, b: Tensor, fn: Any, node_cls: type[OpNode],
         names: tuple[str, str]) -> Tensor:
    dev = check_same_device(a, b)
    with np.errstate(all="ignore"):  # inf * 0 inside the product: NaN, as in torch
        data = fn(a.data, b.data)
    return record(as_tensor(contiguous(data), dev), node_cls, (a, b), {names[0]: a, names[1]: b})


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
        return _squeeze0(mm(unsqueeze(a, 0), b))
    raise RuntimeError(
        f"matmul of {a.ndim}-D and {b.ndim}-D tensors is not supported by this engine "
        "(use 1-D or 2-D operands)"
    )


class SqueezeBackward4(OpNode):
    """``squeeze_(dim)``, in place on the ``mm`` result of a 1-D @ 2-D ``matmul``."""

    self_sizes: tuple[int, ...]

    def apply(self, grads: Grads) -> Grads:
        return [reshape(grads[0], self.self_sizes)]


def _squeeze0(a: Tensor) -> Tensor:
    """``squeeze_(0)`` on ``at::matmul``'s own ``mm`` result: a view without dim 0."""
    data = a.data
    if isinstance(data, np.ndarray):
        view = as_strided(data, a.shape[1:], element_strides(data)[1:])
    else:
        view = data.reshape(a.shape[1:])
    return record(as_tensor(view, a.device), SqueezeBackward4, (a,), self_sizes=a.shape)
