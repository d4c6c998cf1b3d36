"""Indexing: ``x[key]`` as the chain of ``select``/``slice`` views PyTorch records.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import device as _dev
from .graph import Node
from .ops_common import (
    Grads,
    _new,
    _record,
    _with_sizes,
)
from .ops_shape import AliasBackward0
from .tensor import Tensor


# --- indexing ------------------------------------------------------------------
class SelectBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        return [_scatter_zeros(grads[0], self._self_sizes, self._key, SelectBackwardBackward0)]


class SliceBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        return [_scatter_zeros(grads[0], self._self_sizes, self._key, SliceBackwardBackward0)]


class SelectBackwardBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        return [_getitem_raw(grads[0], self._key, SelectBackward0)]


class SliceBackwardBackward0(Node):
    def apply(self, grads: Grads) -> Grads:
        return [_getitem_raw(grads[0], self._key, SliceBackward0)]


def _scatter_zeros(g: Tensor, sizes: tuple[int, ...], key: tuple[Any, ...],
                   node_cls: type[Node]) -> Tensor:
    with _dev.on_device(g.device):
        data = _dev.array_module(g.data).zeros(sizes, dtype=g.dtype)
    data[key] = g.data
    out = _record(_new(data, g.device), node_cls, (g,))
    if out.grad_fn is not None:
        out.grad_fn._key = key  # type: ignore[attr-defined]
    return out


def _getitem_raw(a: Tensor, key: tuple[Any, ...], node_cls: type[Node]) -> Tensor:
    # a view, with the base's strides, as select/slice return (``...`` keeps a 0-d result
    # an array)
    out = _with_sizes(_record(_new(a.data[key + (Ellipsis,)], a.device), node_cls, (a,)), a)
    if out.grad_fn is not None:
        out.grad_fn._key = key  # type: ignore[attr-defined]
    return out


def _is_full_slice(k: slice, n: int) -> bool:
    """``applySlice``'s shortcut: start 0, stop past the end, step 1 select everything."""
    return (k.start in (None, 0) and (k.stop is None or k.stop >= n)
            and k.step in (None, 1))


def index(a: Tensor, key: Any) -> Tensor:
    """Integer and slice indexing as a chain of ``select``/``slice``, as PyTorch records it.

    A lone slice (``x[:]``) always records a slice; inside a tuple, a slice that
    selects everything is skipped, and if nothing is left the result is an alias."""
    multi = isinstance(key, tuple)
    if not multi:
        key = (key,)
    out, dim = a, 0
    for k in key:
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer, slice)):
            raise TypeError(
                f"only integers and slices are valid indices here (got {type(k).__name__})"
            )
        if dim >= out.ndim:
            raise IndexError(
                f"too many indices for tensor of dimension {a.ndim}"
            )
        full = (slice(None),) * dim
        if isinstance(k, slice):
            if multi and _is_full_slice(k, out.shape[dim]):
                dim += 1
                continue
            out = _getitem_raw(out, full + (k,), SliceBackward0)
            dim += 1
        else:
            n = out.shape[dim]
            if not -n <= k < n:
                raise IndexError(
                    f"index {k} is out of bounds for dimension {dim} with size {n}"
                )
            out = _getitem_raw(out, full + (int(k) % n,), SelectBackward0)
    if out is a:
        out = _record(_new(a.data[...], a.device), AliasBackward0, (a,))
    return out
