"""Indexing: ``x[key]`` as the chain of views PyTorch records (``applySlicing``):
``select`` and ``slice`` for integers and slices, ``unsqueeze`` for ``None``, ``alias`` for
a key that selects everything, then one ``index`` for Tensor, list and mask indices.

Mirrors ``at::select``/``at::slice`` (``SelectBackward0``/``SliceBackward0``, whose
gradients are ``select_backward``/``slice_backward``: zeros with the gradient written in,
recording ``SelectBackwardBackward0``/``SliceBackwardBackward0`` in a double backward),
``at::alias`` (``AliasBackward0``), ``at::index`` (``IndexBackward0``: the gradient
accumulated into zeros, ``_index_put_impl_``, ``IndexPutImplBackward0``) and PyTorch's
index errors, word for word.

Departures: a view is NumPy's basic indexing of the previous view (the same strides as
ATen's), and a backward formula writes into its zeros with NumPy indexing, not through a
view and ``copy_``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import device as _dev
from ..tensor import Tensor
from .base import Grads, OpNode, as_tensor, as_view, record
from .views import unsqueeze


class SelectBackward0(OpNode):
    self_sizes: tuple[int, ...]
    key: tuple[Any, ...]

    def apply(self, grads: Grads) -> Grads:
        return [_scatter_zeros(grads[0], self.self_sizes, self.key, SelectBackwardBackward0)]


class SliceBackward0(OpNode):
    self_sizes: tuple[int, ...]
    key: tuple[Any, ...]

    def apply(self, grads: Grads) -> Grads:
        return [_scatter_zeros(grads[0], self.self_sizes, self.key, SliceBackwardBackward0)]


class SelectBackwardBackward0(OpNode):
    key: tuple[Any, ...]

    def apply(self, grads: Grads) -> Grads:
        return [index_view(grads[0], self.key, SelectBackward0)]


class SliceBackwardBackward0(OpNode):
    key: tuple[Any, ...]

    def apply(self, grads: Grads) -> Grads:
        return [index_view(grads[0], self.key, SliceBackward0)]


class AliasBackward0(OpNode):
    """``alias``: indexing that selects everything (``x[:, :]``, ``x[()]``)."""

    def apply(self, grads: Grads) -> Grads:
        return [grads[0]]


def _scatter_zeros(g: Tensor, sizes: tuple[int, ...], key: tuple[Any, ...],
                   node_cls: type[OpNode]) -> Tensor:
    """``select_backward``/``slice_backward``: zeros of ``sizes`` with ``g`` at ``key``."""
    with _dev.on_device(g.device):
        data = _dev.array_module(g.data).zeros(sizes, dtype=g.dtype)
    data[key] = g.data
    return record(as_tensor(data, g.device), node_cls, (g,), key=key)


def index_view(a: Tensor, key: tuple[Any, ...], node_cls: type[OpNode]) -> Tensor:
    """The select or slice view of ``a`` at ``key`` (integers and slices only), recording
    ``node_cls``."""
    # a view, with the base's strides, as select/slice return (``...`` keeps a 0-d result
    # an array)
    return record(as_view(a, as_tensor(a.data[key + (Ellipsis,)], a.device)), node_cls, (a,),
                  self_sizes=a.shape, key=key)


def _is_full_slice(k: slice, n: int) -> bool:
    """``applySlice``'s shortcut: start 0, stop past the end, step 1 select everything."""
    return (k.start in (None, 0) and (k.stop is None or k.stop >= n)
            and k.step in (None, 1))


def _expand_key(a: Tensor, key: tuple[Any, ...]) -> tuple[Any, ...]:
    """``...`` replaced by the full slices it stands for (``applySlicing``)."""
    if not any(k is Ellipsis for k in key):
        return key
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = 0
    for k in key:
        if k is None or k is Ellipsis:
            continue
        used += k.ndim if isinstance(k, Tensor) and k.dtype == np.bool_ else 1
    i = next(i for i, k in enumerate(key) if k is Ellipsis)
    return key[:i] + (slice(None),) * max(a.ndim - used, 0) + key[i + 1:]


def _advanced(k: Any, xp: Any) -> Any:
    """A Tensor or list index as an index array of the tensor's module."""
    if isinstance(k, Tensor):
        if k.dtype != np.bool_ and k.dtype.kind not in "iu":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        return k.data
    arr = xp.asarray(k)
    if arr.dtype.kind not in "biu":
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    return arr


def index(a: Tensor, key: Any) -> Tensor:
    """Indexing as PyTorch records it (``applySlicing``): integers and slices as a chain
    of ``select``/``slice`` views, ``None`` as ``unsqueeze``, ``...`` as the slices it
    stands for; then Tensor, list and mask indices, if any, as one ``index``
    (``IndexBackward0``).

    A lone slice (``x[:]``) always records a slice; inside a tuple, a slice that
    selects everything is skipped, and if nothing is left the result is an alias."""
    multi = isinstance(key, tuple)
    if not multi:
        key = (key,)
    if any(k is Ellipsis for k in key):
        multi = True
    key = _expand_key(a, key)
    out, dim = a, 0
    adv: dict[int, Any] = {}
    xp = _dev.array_module(a.data)
    for k in key:
        if k is None:
            out = unsqueeze(out, dim)
            dim += 1
            continue
        if isinstance(k, (Tensor, list)):
            adv[dim] = _advanced(k, xp)
            dim += adv[dim].ndim if adv[dim].dtype == np.bool_ else 1
            continue
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer, slice)):
            raise IndexError(
                "only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                f"Variables are valid indices (got {type(k).__name__})"
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
            out = index_view(out, full + (k,), SliceBackward0)
            dim += 1
        else:
            n = out.shape[dim]
            if not -n <= k < n:
                raise IndexError(
                    f"index {k} is out of bounds for dimension {dim} with size {n}"
                )
            out = index_view(out, full + (int(k) % n,), SelectBackward0)
    if adv:
        if dim > out.ndim:
            raise IndexError(f"too many indices for tensor of dimension {a.ndim}")
        last = max(adv)
        adv_key = tuple(adv.get(i, slice(None)) for i in range(last + 1))
        return _index_adv(out, adv_key)
    if out is a:
        out = record(as_view(a, as_tensor(a.data[...], a.device)), AliasBackward0, (a,))
    return out


class IndexBackward0(OpNode):
    """Advanced indexing: the gradient accumulated into zeros at the indexed places."""

    self_sizes: tuple[int, ...]
    key: tuple[Any, ...]

    def apply(self, grads: Grads) -> Grads:
        return [_index_put_zeros(grads[0], self.self_sizes, self.key)]


class IndexPutImplBackward0(OpNode):
    """``_index_put_impl_(zeros, indices, grad, accumulate=True)``: IndexBackward0's
    gradient, recorded in a double backward (the zeros' edge is invalid)."""

    key: tuple[Any, ...]

    def apply(self, grads: Grads) -> Grads:
        return [None, _index_adv(grads[0], self.key)]


def _index_adv(a: Tensor, key: tuple[Any, ...]) -> Tensor:
    try:
        data = a.data[key]
    except IndexError as e:
        raise IndexError(str(e).replace("axis", "dimension")) from None
    return record(as_tensor(data, a.device), IndexBackward0, (a,), self_sizes=a.shape, key=key)


def _index_put_zeros(g: Tensor, sizes: tuple[int, ...], key: tuple[Any, ...]) -> Tensor:
    with _dev.on_device(g.device):
        data = _dev.array_module(g.data).zeros(sizes, dtype=g.dtype)
    np.add.at(data, key, g.data)  # a ufunc: a device array's module runs it
    return record(as_tensor(data, g.device), IndexPutImplBackward0, (None, g), key=key)
