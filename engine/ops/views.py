"""More views: ``unsqueeze``, ``squeeze``, ``transpose``, ``permute``, ``flatten`` and
``contiguous``, each keeping its base's strides as ATen's view does (``as_strided`` on
a NumPy array; the module's own view functions on a device array).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import device as _dev
from ..graph import Node
from ..strides import as_strided, element_strides, is_contiguous
from ..tensor import Tensor
from .base import Grads, OpNode, _new, _record, _with_sizes
from .shape import UnsqueezeBackward0, _clone, reshape


def _wrap_dim(dim: int, ndim: int) -> int:
    """``maybe_wrap_dim``: a negative dimension counts from the end; out of range raises."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
            f"but got {dim})")
    return dim % n


def _view(a: Tensor, shape: tuple[int, ...], strides: tuple[int, ...]) -> Any:
    data = a.data
    if isinstance(data, np.ndarray):
        return as_strided(data, shape, strides)
    return data.reshape(shape)


def unsqueeze(a: Tensor, dim: int) -> Tensor:
    d = _wrap_dim(dim, a.ndim + 1)
    st = element_strides(a.data) if isinstance(a.data, np.ndarray) else (1,) * a.ndim
    new_stride = 1 if d >= a.ndim else a.shape[d] * st[d]
    shape = (*a.shape[:d], 1, *a.shape[d:])
    strides = (*st[:d], new_stride, *st[d:])
    return _with_sizes(_record(_new(_view(a, shape, strides), a.device),
                               UnsqueezeBackward0, (a,)), a)


class SqueezeBackward0(OpNode):
    """``squeeze()``: every size-1 dimension."""

    def apply(self, grads: Grads) -> Grads:
        return [reshape(grads[0], self._self_sizes)]


class SqueezeBackward1(SqueezeBackward0):
    """``squeeze(dim)``."""


class SqueezeBackward2(SqueezeBackward0):
    """``squeeze(dims)``: a tuple of dimensions."""


def squeeze(a: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    if dim is None:
        dims = {i for i, n in enumerate(a.shape) if n == 1}
        node: type[Node] = SqueezeBackward0
    elif isinstance(dim, (int, np.integer)):
        dims = {_wrap_dim(int(dim), a.ndim)}
        node = SqueezeBackward1
    else:
        dims = {_wrap_dim(int(d), a.ndim) for d in dim}
        node = SqueezeBackward2
    dims = {d for d in dims if a.ndim and a.shape[d] == 1}
    st = element_strides(a.data) if isinstance(a.data, np.ndarray) else (1,) * a.ndim
    keep = [i for i in range(a.ndim) if i not in dims]
    shape = tuple(a.shape[i] for i in keep)
    strides = tuple(st[i] for i in keep)
    return _with_sizes(_record(_new(_view(a, shape, strides), a.device), node, (a,)), a)


class TransposeBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [transpose(grads[0], self._dim0, self._dim1)]


def transpose(a: Tensor, dim0: int, dim1: int) -> Tensor:
    d0, d1 = _wrap_dim(dim0, a.ndim), _wrap_dim(dim1, a.ndim)
    xp = _dev.array_module(a.data)
    data = xp.swapaxes(a.data, d0, d1) if a.ndim else a.data
    out = _record(_new(data, a.device), TransposeBackward0, (a,))
    if out.grad_fn is not None:
        out.grad_fn._dim0, out.grad_fn._dim1 = d0, d1  # type: ignore[attr-defined]
    return out


class PermuteBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        inverse = [0] * len(self._dims)
        for i, d in enumerate(self._dims):
            inverse[d] = i
        return [permute(grads[0], inverse)]


def permute(a: Tensor, dims: Sequence[int]) -> Tensor:
    dims = [_wrap_dim(int(d), a.ndim) for d in dims]
    if len(dims) != a.ndim:
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match "
            f"the length of the desired ordering of dimensions i.e. input.dim() = {a.ndim} "
            f"is not equal to len(dims) = {len(dims)}")
    if len(set(dims)) != len(dims):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    xp = _dev.array_module(a.data)
    out = _record(_new(xp.transpose(a.data, dims), a.device), PermuteBackward0, (a,))
    if out.grad_fn is not None:
        out.grad_fn._dims = tuple(dims)  # type: ignore[attr-defined]
    return out


def flatten(a: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """``flatten``: ``reshape`` (so ``ViewBackward0`` for a contiguous input); the
    tensor itself where nothing is merged, as ATen returns it."""
    if a.ndim == 0:
        return reshape(a, (1,))
    s, e = _wrap_dim(start_dim, a.ndim), _wrap_dim(end_dim, a.ndim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return a
    n = 1
    for size in a.shape[s:e + 1]:
        n *= size
    return reshape(a, (*a.shape[:s], n, *a.shape[e + 1:]))


def contiguous(a: Tensor) -> Tensor:
    """The tensor itself if contiguous, else a contiguous ``clone`` (``CloneBackward0``)."""
    data = a.data
    if not isinstance(data, np.ndarray) or is_contiguous(a.shape, element_strides(data)):
        return a
    return _clone(a, contiguous=True)
