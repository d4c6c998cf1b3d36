"""Reshapes and copies: ``reshape`` (a view, ``_reshape_alias`` or clone +
``_unsafe_view``, as ATen picks from the strides), ``flatten``, ``clone``, ``contiguous``,
``to``, and the gradient-free conversions (``long()``, ``bool()``).

Mirrors ``at::reshape`` (``ViewBackward0``, ``ReshapeAliasBackward0``,
``UnsafeViewBackward0``: which one from ``computeStride``, as PyTorch chooses, so the
recorded node is PyTorch's), ``at::clone(memory_format)`` (``CloneBackward0``: dense
strides kept, else the dimension order), ``at::flatten``, ``at::contiguous`` and
``at::_to_copy`` (``ToCopyBackward0``).

Departures: on a device (CuPy) array ``reshape`` records ``ViewBackward0`` without
stride bookkeeping.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import device as _dev
from ..strides import (
    as_strided,
    compute_stride,
    element_strides,
    infer_dense_strides,
    infer_size,
    is_contiguous,
    is_non_overlapping_and_dense,
    restride,
)
from ..tensor import Tensor
from .base import Grads, OpNode, as_tensor, as_view, is_dense, record, wrap_dim


class ViewBackward0(OpNode):
    self_sizes: tuple[int, ...]

    def apply(self, grads: Grads) -> Grads:
        return [reshape(grads[0], self.self_sizes)]


class ReshapeAliasBackward0(OpNode):
    """``_reshape_alias``: what ``reshape`` records for a non-contiguous view."""

    self_sizes: tuple[int, ...]

    def apply(self, grads: Grads) -> Grads:
        return [reshape(grads[0], self.self_sizes)]


class UnsafeViewBackward0(OpNode):
    """``_unsafe_view``: what ``reshape`` records after copying (``clone`` + view)."""

    self_sizes: tuple[int, ...]

    def apply(self, grads: Grads) -> Grads:
        return [reshape(grads[0], self.self_sizes)]


class CloneBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [grads[0]]


class ToCopyBackward0(OpNode):
    src_device: str
    src_dtype: Any

    def apply(self, grads: Grads) -> Grads:
        return [to(grads[0], self.src_device, self.src_dtype)]


def reshape(a: Tensor, shape: Sequence[int]) -> Tensor:
    """``at::reshape``: ``view`` if contiguous, else ``_reshape_alias`` if the new
    shape is viewable (``computeStride``), else ``clone`` + ``_unsafe_view``."""
    shape = infer_size(shape, a.numel())
    data = a.data
    if not isinstance(data, np.ndarray):  # CuPy: no stride bookkeeping
        return record(as_view(a, as_tensor(data.reshape(shape), a.device)), ViewBackward0, (a,),
                      self_sizes=a.shape)
    old_strides = element_strides(data)
    strides = compute_stride(a.shape, old_strides, shape)
    if is_contiguous(a.shape, old_strides):
        assert strides is not None
        node_cls: type[OpNode] = ViewBackward0
    elif strides is not None:
        node_cls = ReshapeAliasBackward0
    else:
        a = _clone(a, contiguous=True)
        data = a.data
        strides = compute_stride(a.shape, element_strides(data), shape)
        assert strides is not None
        node_cls = UnsafeViewBackward0
    out = as_tensor(as_strided(data, shape, strides), a.device)
    if node_cls is not UnsafeViewBackward0:  # a view of ``a``; else of a fresh copy
        as_view(a, out)
    return record(out, node_cls, (a,), self_sizes=a.shape)


def flatten(a: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """``flatten``: ``reshape`` (so ``ViewBackward0`` for a contiguous input); the
    tensor itself where nothing is merged, as ATen returns it."""
    if a.ndim == 0:
        return reshape(a, (1,))
    s, e = wrap_dim(start_dim, a.ndim), wrap_dim(end_dim, a.ndim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return a
    n = 1
    for size in a.shape[s:e + 1]:
        n *= size
    return reshape(a, (*a.shape[:s], n, *a.shape[e + 1:]))


def clone(a: Tensor) -> Tensor:
    return _clone(a, contiguous=False)


def _clone(a: Tensor, contiguous: bool) -> Tensor:
    """``clone(memory_format=preserve)`` keeps dense strides (else the dimension order);
    ``contiguous=True`` is ``MemoryFormat::Contiguous``."""
    data = a.data
    if type(data) is np.ndarray and is_dense(data):
        # Dense and contiguous (a gradient, usually): both memory formats keep the
        # layout, which NumPy's copy keeps too (checked: ``restride`` is the fallback).
        copy = np.array(data, copy=True)
        if not is_dense(copy):
            copy = restride(copy, None)
    elif isinstance(data, np.ndarray):
        st = element_strides(data)
        if contiguous:
            strides: tuple[int, ...] | None = None
        elif is_non_overlapping_and_dense(data.shape, st):
            strides = st
        else:
            strides = infer_dense_strides(data.shape, st)
        copy = restride(np.array(data, copy=True), strides)
    else:
        copy = data.copy()
    return record(as_tensor(copy, a.device), CloneBackward0, (a,))


def contiguous(a: Tensor) -> Tensor:
    """The tensor itself if contiguous, else a contiguous ``clone`` (``CloneBackward0``)."""
    data = a.data
    if not isinstance(data, np.ndarray) or is_contiguous(a.shape, element_strides(data)):
        return a
    return _clone(a, contiguous=True)


def to(a: Tensor, device: str | None, dtype: Any = None) -> Tensor:
    if dtype is None and isinstance(device, (type, np.dtype)):  # ``t.to(dtype)``
        device, dtype = None, device
    dev = _dev.canonical(device) if device is not None else a.device
    if dev == a.device and (dtype is None or np.dtype(dtype) == a.dtype):
        return a
    data = a.data if dtype is None else a.data.astype(dtype)
    return record(as_tensor(_dev.to_device_array(data, dev), dev), ToCopyBackward0, (a,),
                  src_device=a.device, src_dtype=a.dtype)


def detached(a: Tensor, dtype: Any) -> Tensor:
    """``long()``, ``bool()``: a conversion to a dtype without gradients (no node)."""
    return Tensor(a.data.astype(dtype), device=a.device)
