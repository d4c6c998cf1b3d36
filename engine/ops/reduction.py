"""Reductions (``sum``, ``mean``, ...) and ``sum_to``, the reduction of a broadcast
gradient that the engine's ``validate_outputs`` calls.
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from ..graph import Node
from ..strides import (
    contiguous,
)
from ..tensor import Tensor
from . import shape as _shape
from .arith import div
from .base import (
    Grads,
    OpNode,
    _new,
    _norm_dims,
    _record,
)


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
    return _shape.reshape(r, tuple(shape)) if r.shape != tuple(shape) else r


def is_expandable_to(shape: tuple[int, ...], desired: tuple[int, ...]) -> bool:
    if len(shape) > len(desired):
        return False
    for a, b in zip(reversed(shape), reversed(desired)):
        if a != b and a != 1:
            return False
    return True


def _unsqueeze_shape(g: Tensor, in_shape: tuple[int, ...], dims: tuple[int, ...],
                     keepdim: bool) -> Tensor:
    if keepdim or not dims:
        return g
    kshape = tuple(1 if i in dims else n for i, n in enumerate(in_shape))
    return _shape.reshape(g, kshape)


class SumBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [_shape.expand(grads[0], self._self_sizes)]


class SumBackward1(OpNode):
    def apply(self, grads: Grads) -> Grads:
        g = _unsqueeze_shape(grads[0], self._self_sizes, self._dims, self._keepdim)
        return [_shape.expand(g, self._self_sizes)]


class MeanBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        n = builtins.max(int(np.prod(self._self_sizes)), 1)
        return [div(_shape.expand(grads[0], self._self_sizes), n)]


class MeanBackward1(OpNode):
    def apply(self, grads: Grads) -> Grads:
        g = _unsqueeze_shape(grads[0], self._self_sizes, self._dims, self._keepdim)
        # a 0-dim input reduced over dim 0 / -1 has one element
        n = int(np.prod([self._self_sizes[d] for d in self._dims
                         if d < len(self._self_sizes)]))
        return [div(_shape.expand(g, self._self_sizes), builtins.max(n, 1))]


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
