"""Views and copies: ``reshape`` (view, ``_reshape_alias`` or clone +
``_unsafe_view``, as ATen picks from the strides), ``expand``, ``t``, ``clone``,
``to``, ``unsqueeze``/``squeeze``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import device as _dev
from .. import grad_mode
from ..graph import Node
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
from . import reduction as _red
from .base import (
    Grads,
    OpNode,
    _is_dense,
    _new,
    _record,
    _with_sizes,
)


class ViewBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [reshape(grads[0], self._self_sizes)]


class ExpandBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [_red.sum_to(grads[0], self._self_sizes)]


class TBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [t(grads[0])]


class CloneBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [grads[0]]


class ReshapeAliasBackward0(OpNode):
    """``_reshape_alias``: what ``reshape`` records for a non-contiguous view."""

    def apply(self, grads: Grads) -> Grads:
        return [reshape(grads[0], self._self_sizes)]


class UnsafeViewBackward0(OpNode):
    """``_unsafe_view``: what ``reshape`` records after copying (``clone`` + view)."""

    def apply(self, grads: Grads) -> Grads:
        return [reshape(grads[0], self._self_sizes)]


class AliasBackward0(OpNode):
    """``alias``: indexing that selects everything (``x[:, :]``, ``x[()]``)."""

    def apply(self, grads: Grads) -> Grads:
        return [grads[0]]


class ToCopyBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [to(grads[0], self._src_device, self._src_dtype)]


def reshape(a: Tensor, shape: Sequence[int]) -> Tensor:
    """``at::reshape``: ``view`` if contiguous, else ``_reshape_alias`` if the new
    shape is viewable (``computeStride``), else ``clone`` + ``_unsafe_view``."""
    shape = infer_size(shape, a.numel())
    data = a.data
    if not isinstance(data, np.ndarray):  # CuPy: no stride bookkeeping
        return _with_sizes(_record(_new(data.reshape(shape), a.device), ViewBackward0, (a,)), a)
    old_strides = element_strides(data)
    strides = compute_stride(a.shape, old_strides, shape)
    if is_contiguous(a.shape, old_strides):
        assert strides is not None
        node_cls: type[Node] = ViewBackward0
    elif strides is not None:
        node_cls = ReshapeAliasBackward0
    else:
        a = _clone(a, contiguous=True)
        data = a.data
        strides = compute_stride(a.shape, element_strides(data), shape)
        assert strides is not None
        node_cls = UnsafeViewBackward0
    out = _new(as_strided(data, shape, strides), a.device)
    return _with_sizes(_record(out, node_cls, (a,)), a)


def expand(a: Tensor, shape: Sequence[int]) -> Tensor:
    shape = tuple(a.shape[i - (len(shape) - a.ndim)] if n == -1 else n
                  for i, n in enumerate(shape))
    if a.shape == shape:
        return a if not grad_mode.is_grad_enabled() else _with_sizes(
            _record(_new(a.data, a.device), ExpandBackward0, (a,)), a)
    xp = _dev.array_module(a.data)
    try:
        data = xp.broadcast_to(a.data, shape)
    except ValueError:
        raise RuntimeError(
            f"The expanded size of the tensor must match the existing size at non-singleton "
            f"dimension: expand({list(a.shape)}) to {list(shape)}"
        ) from None
    return _with_sizes(_record(_new(xp.array(data), a.device), ExpandBackward0, (a,)), a)


def t(a: Tensor) -> Tensor:
    if a.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {a.ndim}D")
    return _record(_new(a.data.T, a.device), TBackward0, (a,))


def clone(a: Tensor) -> Tensor:
    return _clone(a, contiguous=False)


def _clone(a: Tensor, contiguous: bool) -> Tensor:
    """``clone(memory_format=preserve)`` keeps dense strides (else the dimension order);
    ``contiguous=True`` is ``MemoryFormat::Contiguous``."""
    data = a.data
    if type(data) is np.ndarray and _is_dense(data):
        # Dense and contiguous (a gradient, usually): both memory formats keep the
        # layout, which NumPy's copy keeps too (checked: ``restride`` is the fallback).
        copy = np.array(data, copy=True)
        if not _is_dense(copy):
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
    return _record(_new(copy, a.device), CloneBackward0, (a,))


def to(a: Tensor, device: str | None, dtype: Any = None) -> Tensor:
    if dtype is None and isinstance(device, (type, np.dtype)):  # ``t.to(dtype)``
        device, dtype = None, device
    dev = _dev.canonical(device) if device is not None else a.device
    if dev == a.device and (dtype is None or np.dtype(dtype) == a.dtype):
        return a
    data = a.data if dtype is None else a.data.astype(dtype)
    out = _record(_new(_dev.to_device_array(data, dev), dev), ToCopyBackward0, (a,))
    if out.grad_fn is not None:
        out.grad_fn._src_device = a.device  # type: ignore[attr-defined]
        out.grad_fn._src_dtype = a.dtype  # type: ignore[attr-defined]
    return out


class UnsqueezeBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [reshape(grads[0], self._self_sizes)]


class SqueezeBackward4(OpNode):
    """``squeeze_(dim)``, in place on the ``mm`` result of a 1-D @ 2-D ``matmul``."""

    def apply(self, grads: Grads) -> Grads:
        return [reshape(grads[0], self._self_sizes)]


def _unsqueeze0(a: Tensor) -> Tensor:
    """``unsqueeze(0)``: a view; the new dimension's stride is size(0) * stride(0)."""
    data = a.data
    if isinstance(data, np.ndarray):
        st = element_strides(data)
        view = as_strided(data, (1, *a.shape), (a.shape[0] * st[0] if st else 1, *st))
    else:
        view = data.reshape((1, *a.shape))
    return _with_sizes(_record(_new(view, a.device), UnsqueezeBackward0, (a,)), a)


def _squeeze0(a: Tensor) -> Tensor:
    data = a.data
    if isinstance(data, np.ndarray):
        view = as_strided(data, a.shape[1:], element_strides(data)[1:])
    else:
        view = data.reshape(a.shape[1:])
    return _with_sizes(_record(_new(view, a.device), SqueezeBackward4, (a,)), a)


def detached(a: Tensor, dtype: Any) -> Tensor:
    """``long()``, ``bool()``: a conversion to a dtype without gradients (no node)."""
    return Tensor(a.data.astype(dtype), device=a.device)
