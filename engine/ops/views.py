"""Views: ``t``, ``unsqueeze``, ``squeeze``, ``transpose`` and ``permute``, each keeping
its base's strides as ATen's view does (``as_strided`` on a NumPy array; the module's own
view functions on a device array).

Mirrors ``at::t``, ``at::unsqueeze``, ``at::squeeze`` (``SqueezeBackward0`` for every
size-1 dim, ``1`` for one dim, ``2`` for a tuple of dims), ``at::transpose`` and
``at::permute``, with their nodes and ``derivatives.yaml`` formulas.

Departures: ``unsqueeze``'s and ``squeeze(dim)``'s gradients are a ``reshape`` back to the
input's sizes, where PyTorch's are ``squeeze(dim)`` and ``unsqueeze_to``, so a double
backward records other nodes.  Each view shares its base's version counter (``as_view``);
an in-place op on a view does not rewrite the base's history (see ``inplace.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import device as _dev
from ..strides import as_strided, element_strides
from ..tensor import Tensor
from .base import Grads, OpNode, as_tensor, as_view, record, wrap_dim
from .shape import reshape


def _view(a: Tensor, shape: tuple[int, ...], strides: tuple[int, ...]) -> Any:
    data = a.data
    if isinstance(data, np.ndarray):
        return as_strided(data, shape, strides)
    return data.reshape(shape)


class TBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [t(grads[0])]


def t(a: Tensor) -> Tensor:
    if a.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {a.ndim}D")
    return record(as_view(a, as_tensor(a.data.T, a.device)), TBackward0, (a,))


class UnsqueezeBackward0(OpNode):
    self_sizes: tuple[int, ...]

    def apply(self, grads: Grads) -> Grads:
        return [reshape(grads[0], self.self_sizes)]


def unsqueeze(a: Tensor, dim: int) -> Tensor:
    """A view; the new dimension's stride is size(d) * stride(d) (1 at the end)."""
    d = wrap_dim(dim, a.ndim + 1)
    st = element_strides(a.data) if isinstance(a.data, np.ndarray) else (1,) * a.ndim
    new_stride = 1 if d >= a.ndim else a.shape[d] * st[d]
    shape = (*a.shape[:d], 1, *a.shape[d:])
    strides = (*st[:d], new_stride, *st[d:])
    return record(as_view(a, as_tensor(_view(a, shape, strides), a.device)),
                  UnsqueezeBackward0, (a,), self_sizes=a.shape)


class SqueezeBackward0(OpNode):
    """``squeeze()``: every size-1 dimension."""

    self_sizes: tuple[int, ...]

    def apply(self, grads: Grads) -> Grads:
        return [reshape(grads[0], self.self_sizes)]


class SqueezeBackward1(SqueezeBackward0):
    """``squeeze(dim)``."""


class SqueezeBackward2(SqueezeBackward0):
    """``squeeze(dims)``: a tuple of dimensions."""


def squeeze(a: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    if dim is None:
        dims = {i for i, n in enumerate(a.shape) if n == 1}
        node: type[OpNode] = SqueezeBackward0
    elif isinstance(dim, (int, np.integer)):
        dims = {wrap_dim(int(dim), a.ndim)}
        node = SqueezeBackward1
    else:
        dims = {wrap_dim(int(d), a.ndim) for d in dim}
        node = SqueezeBackward2
    dims = {d for d in dims if a.ndim and a.shape[d] == 1}
    st = element_strides(a.data) if isinstance(a.data, np.ndarray) else (1,) * a.ndim
    keep = [i for i in range(a.ndim) if i not in dims]
    shape = tuple(a.shape[i] for i in keep)
    strides = tuple(st[i] for i in keep)
    return record(as_view(a, as_tensor(_view(a, shape, strides), a.device)), node, (a,),
                  self_sizes=a.shape)


class TransposeBackward0(OpNode):
    dim0: int
    dim1: int

    def apply(self, grads: Grads) -> Grads:
        return [transpose(grads[0], self.dim0, self.dim1)]


def transpose(a: Tensor, dim0: int, dim1: int) -> Tensor:
    d0, d1 = wrap_dim(dim0, a.ndim), wrap_dim(dim1, a.ndim)
    xp = _dev.array_module(a.data)
    data = xp.swapaxes(a.data, d0, d1) if a.ndim else a.data
    return record(as_view(a, as_tensor(data, a.device)), TransposeBackward0, (a,), dim0=d0, dim1=d1)


class PermuteBackward0(OpNode):
    dims: tuple[int, ...]

    def apply(self, grads: Grads) -> Grads:
        inverse = [0] * len(self.dims)
        for i, d in enumerate(self.dims):
            inverse[d] = i
        return [permute(grads[0], inverse)]


def permute(a: Tensor, dims: Sequence[int]) -> Tensor:
    dims = [wrap_dim(int(d), a.ndim) for d in dims]
    if len(dims) != a.ndim:
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match "
            f"the length of the desired ordering of dimensions i.e. input.dim() = {a.ndim} "
            f"is not equal to len(dims) = {len(dims)}")
    if len(set(dims)) != len(dims):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    xp = _dev.array_module(a.data)
    return record(as_view(a, as_tensor(xp.transpose(a.data, dims), a.device)),
                  PermuteBackward0, (a,),
                  dims=tuple(dims))
