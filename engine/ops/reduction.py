"""Sums and their dual: ``sum``, ``mean``, ``expand``, and ``sum_to``, the reduction of a
broadcast gradient that the engine's ``validate_outputs`` calls.

Mirrors ``at::sum``/``at::mean`` (``SumBackward0``/``1``, ``MeanBackward0``/``1``: the
gradient unsqueezed back over the reduced dims and expanded, as ``sum_backward`` does),
``at::expand`` (``ExpandBackward0``: ``at::sum_to``), ``at::sum_to`` and
``at::is_expandable_to``.

Departures: ``expand`` lives here, not with the views, because its gradient is a sum
and a sum's gradient is an expand: the pair in one module keeps the imports one way.
``expand`` copies the broadcast array (NumPy's ``broadcast_to`` is read-only).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import device as _dev
from .. import grad_mode
from ..strides import contiguous
from ..tensor import Tensor
from .arith import div
from .base import Grads, OpNode, as_tensor, norm_dims, record
from .shape import reshape


# --- broadcasting --------------------------------------------------------------
def sum_to(g: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``at::sum_to``: sum a broadcast gradient back to ``shape`` (differentiably)."""
    if g.shape == tuple(shape):
        return g
    if not shape:  # ATen's shortcut to a 0-dim shape: ``sum()`` (SumBackward0)
        return sum(g)
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


def unsqueeze_reduced(g: Tensor, in_shape: tuple[int, ...], dims: tuple[int, ...],
                      keepdim: bool) -> Tensor:
    """A reduction's gradient with the reduced dims put back as size 1 (``unsqueeze_multiple``
    in ``sum_backward``), unless ``keepdim`` kept them."""
    if keepdim or not dims:
        return g
    kshape = tuple(1 if i in dims else n for i, n in enumerate(in_shape))
    return reshape(g, kshape)


class ExpandBackward0(OpNode):
    self_sizes: tuple[int, ...]

    def apply(self, grads: Grads) -> Grads:
        return [sum_to(grads[0], self.self_sizes)]


def expand(a: Tensor, shape: Sequence[int]) -> Tensor:
    shape = tuple(a.shape[i - (len(shape) - a.ndim)] if n == -1 else n
                  for i, n in enumerate(shape))
    if a.shape == shape:
        return a if not grad_mode.is_grad_enabled() else record(
            as_tensor(a.data, a.device), ExpandBackward0, (a,), self_sizes=a.shape)
    xp = _dev.array_module(a.data)
    try:
        data = xp.broadcast_to(a.data, shape)
    except ValueError:
        raise RuntimeError(
            f"The expanded size of the tensor must match the existing size at non-singleton "
            f"dimension: expand({list(a.shape)}) to {list(shape)}"
        ) from None
    return record(as_tensor(xp.array(data), a.device), ExpandBackward0, (a,),
                  self_sizes=a.shape)


# --- reductions ------------------------------------------------------------------
class SumBackward0(OpNode):
    self_sizes: tuple[int, ...]

    def apply(self, grads: Grads) -> Grads:
        return [expand(grads[0], self.self_sizes)]


class SumBackward1(OpNode):
    self_sizes: tuple[int, ...]
    dims: tuple[int, ...]
    keepdim: bool

    def apply(self, grads: Grads) -> Grads:
        g = unsqueeze_reduced(grads[0], self.self_sizes, self.dims, self.keepdim)
        return [expand(g, self.self_sizes)]


class MeanBackward0(OpNode):
    self_sizes: tuple[int, ...]

    def apply(self, grads: Grads) -> Grads:
        n = builtins.max(int(np.prod(self.self_sizes)), 1)
        return [div(expand(grads[0], self.self_sizes), n)]


class MeanBackward1(OpNode):
    self_sizes: tuple[int, ...]
    dims: tuple[int, ...]
    keepdim: bool

    def apply(self, grads: Grads) -> Grads:
        g = unsqueeze_reduced(grads[0], self.self_sizes, self.dims, self.keepdim)
        # a 0-dim input reduced over dim 0 / -1 has one element
        n = int(np.prod([self.self_sizes[d] for d in self.dims
                         if d < len(self.self_sizes)]))
        return [div(expand(g, self.self_sizes), builtins.max(n, 1))]


def _reduce(a: Tensor, dim: Any, keepdim: bool, method: str,
            node0: type[OpNode], node1: type[OpNode]) -> Tensor:
    # the array's own method (``np.sum`` calls it too): CuPy's runs on the device
    reduce = getattr(a.data, method)
    if dim is None:
        with np.errstate(all="ignore"):  # inf + -inf: NaN, silently, as in torch
            data = reduce()
        return record(as_tensor(contiguous(data), a.device), node0, (a,), self_sizes=a.shape)
    dims = norm_dims(dim, a.ndim)
    with np.errstate(all="ignore"):
        data = reduce(axis=dims if a.ndim else None, keepdims=keepdim)
    return record(as_tensor(contiguous(data), a.device), node1, (a,),
                  self_sizes=a.shape, dims=dims, keepdim=keepdim)


def sum(a: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return _reduce(a, dim, keepdim, "sum", SumBackward0, SumBackward1)


def mean(a: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    return _reduce(a, dim, keepdim, "mean", MeanBackward0, MeanBackward1)
