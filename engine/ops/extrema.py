"""``max``, ``min`` (over everything, over a dimension, or of two tensors) and ``norm``.

Ties as ATen breaks them: ``max()`` over everything spreads the gradient evenly over
the maxima (``evenly_distribute_backward``); ``max(dim)`` gives it to the index it
returns, the first maximum (``value_selecting_reduction_backward``).  ``norm`` is
``linalg_vector_norm`` (``LinalgVectorNormBackward0``), a zero norm giving a zero
gradient; any ``p`` as ``norm_backward`` has it.  ``argmax``/``argmin`` record nothing
(an integer result).

Mirrors ``at::max``/``at::min`` (``MaxBackward0``/``1``, ``MinBackward0``/``1``),
``at::linalg_vector_norm`` and ``at::argmax``/``argmin``, with PyTorch's errors.

Departures: ``norm`` is the vector norm only (no ``"nuc"``, no matrix norm over two dims).
"""

from __future__ import annotations

import math
from collections import namedtuple
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import device as _dev
from ..strides import contiguous
from ..tensor import Tensor
from .arith import div, maximum, minimum, mul
from .base import Grads, OpNode, as_tensor, mask_of, norm_dims, record, wrap_dim
from .grad_ops import masked_fill_tensor, sgn
from .pointwise import abs, masked_fill, pow  # noqa: A004 - torch's names
from .reduction import expand, unsqueeze_reduced
from .views import unsqueeze

# ``torch.return_types.max``: values and indices, by name or unpacked
MaxResult = namedtuple("MaxResult", ["values", "indices"])


class MaxBackward1(OpNode):
    """``max()``: the gradient spread evenly over the tied maxima."""

    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        a, result = s["self"], s["result"]
        xp = _dev.array_module(a.data)
        hit = xp.isnan(a.data) if xp.isnan(result.data) else a.data == result.data
        count = as_tensor(hit.sum().astype(a.dtype), a.device)
        zeros = as_tensor(xp.zeros(a.shape, dtype=a.dtype), a.device)  # grad.new_zeros
        return [masked_fill_tensor(zeros, as_tensor(hit, a.device), div(grads[0], count))]


class MinBackward1(MaxBackward1):
    pass


class MaxBackward0(OpNode):
    """``max(dim)``: the gradient to the returned index."""

    self_sizes: tuple[int, ...]
    dim: int
    keepdim: bool

    def apply(self, grads: Grads) -> Grads:
        idx, sizes, d = self.saved()["indices"], self.self_sizes, self.dim
        g = unsqueeze_reduced(grads[0], sizes, (d,), self.keepdim)
        xp = _dev.array_module(idx.data)
        idx_k = idx.data if self.keepdim else xp.expand_dims(idx.data, d)
        shape = [1] * len(sizes)
        if sizes:
            shape[d] = sizes[d]
        pos = xp.arange(sizes[d] if sizes else 1).reshape(shape)
        return [mul(expand(g, sizes), mask_of(pos == idx_k, g))]


class MinBackward0(MaxBackward0):
    pass


def _full(a: Tensor, is_max: bool) -> Tensor:
    if a.numel() == 0:
        raise RuntimeError(
            f"{'max' if is_max else 'min'}(): Expected reduction dim to be specified for "
            "input.numel() == 0. Specify the reduction dim with the 'dim' argument.")
    xp = _dev.array_module(a.data)
    data = (xp.max if is_max else xp.min)(a.data)
    out = as_tensor(contiguous(data), a.device)
    return record(out, MaxBackward1 if is_max else MinBackward1, (a,),
                  {"self": a, "result": out})


def _along(a: Tensor, dim: int, keepdim: bool, is_max: bool) -> MaxResult:
    d = wrap_dim(dim, a.ndim)
    xp = _dev.array_module(a.data)
    axis = d if a.ndim else None
    idx = (xp.argmax if is_max else xp.argmin)(a.data, axis=axis, keepdims=keepdim)
    values = (xp.max if is_max else xp.min)(a.data, axis=axis, keepdims=keepdim)
    indices = as_tensor(xp.asarray(idx).astype(np.int64), a.device)
    out = record(as_tensor(contiguous(values), a.device), MaxBackward0 if is_max else MinBackward0,
                 (a,), {"indices": indices}, self_sizes=a.shape, dim=d, keepdim=keepdim)
    return MaxResult(out, indices)


def max(a: Tensor, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001
    """``max()``, ``max(dim, keepdim)`` (values, indices) or ``max(other)`` (maximum)."""
    if isinstance(dim, Tensor):
        return maximum(a, dim)
    return _full(a, True) if dim is None else _along(a, int(dim), keepdim, True)


def min(a: Tensor, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001
    if isinstance(dim, Tensor):
        return minimum(a, dim)
    return _full(a, False) if dim is None else _along(a, int(dim), keepdim, False)


class LinalgVectorNormBackward0(OpNode):
    """``linalg_vector_norm_backward`` (``norm_backward`` in FunctionsManual.cpp), one
    branch per ord: 0 (an undefined gradient), 1, 2, +-inf (the arg-extrema share the
    gradient), below 1, below 2, and the rest."""

    dims: tuple[int, ...]  # the dims reduced
    dim: tuple[int, ...]  # the dims asked for (none: all, and nothing to unsqueeze)
    keepdim: bool
    ord: float

    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        a, n = s["self"], s["result"]
        dims, p = self.dims, self.ord
        if p == 0:
            return [None]
        g = grads[0]
        if not self.keepdim and a.ndim:
            for d in sorted(self.dim):  # unsqueeze_multiple
                g, n = unsqueeze(g, d), unsqueeze(n, d)
        xp = _dev.array_module(a.data)
        if p == 1:
            return [mul(sgn(a), g)]
        n_zero = as_tensor(n.data == 0, a.device)
        if p == 2:
            with np.errstate(divide="ignore", invalid="ignore"):
                return [mul(g, masked_fill(div(a, n), n_zero, 0.0))]
        if math.isinf(p):
            a_abs = xp.abs(a.data)
            hit = (a_abs == n.data) | xp.isnan(a_abs)
            count = hit.sum(axis=dims, keepdims=True).astype(a.dtype)
            share = mul(div(g, as_tensor(count, a.device)), mask_of(hit, a))
            return [mul(sgn(a), share)]
        zero = as_tensor(a.data == 0, a.device)
        with np.errstate(divide="ignore", invalid="ignore"):
            if p < 1:
                scaled = mul(sgn(a), masked_fill(pow(abs(a), p - 1), zero, 0.0))
                return [mul(mul(scaled, g), pow(n, 1 - p))]
            scaled = mul(sgn(a), pow(abs(a), p - 1)) if p < 2 else mul(a, pow(abs(a), p - 2))
            scale = masked_fill(div(g, pow(n, p - 1)), n_zero, 0.0)
        return [mul(scaled, scale)]


def _vector_norm(xp: Any, x: Any, p: float, axis: Any, keepdim: bool) -> Any:
    """``linalg_vector_norm``'s value for any ord."""
    x_abs = xp.abs(x)
    if p == 0:
        return (x_abs != 0).sum(axis=axis, keepdims=keepdim).astype(x.dtype)
    if p == math.inf:
        return xp.max(x_abs, axis=axis, keepdims=keepdim)
    if p == -math.inf:
        return xp.min(x_abs, axis=axis, keepdims=keepdim)
    if p == 1:
        return x_abs.sum(axis=axis, keepdims=keepdim)
    if p == 2:
        return xp.sqrt((x * x).sum(axis=axis, keepdims=keepdim))
    return (x_abs ** p).sum(axis=axis, keepdims=keepdim) ** (1.0 / p)


def norm(a: Tensor, p: float | str | None = 2, dim: int | Sequence[int] | None = None,
         keepdim: bool = False) -> Tensor:
    """``torch.norm``/``Tensor.norm`` of a vector norm: any real ``p`` (``inf``, ``-inf``,
    0, fractional, negative) and ``"fro"`` (2), over ``dim`` or everything."""
    if p is None or p == "fro":
        p = 2
    if isinstance(p, str):
        raise RuntimeError(f"norm: this engine has vector norms only (got p = {p!r})")
    p = float(p)
    if a.dtype.kind not in "fc":
        raise RuntimeError(
            "linalg.vector_norm: Expected a floating point or complex tensor as input. "
            f"Got {np.dtype(a.dtype).name}")
    dims = tuple(range(a.ndim)) if dim is None else norm_dims(dim, a.ndim)
    axis = dims if a.ndim else None
    xp = _dev.array_module(a.data)
    with np.errstate(all="ignore"):
        data = _vector_norm(xp, a.data, p, axis, keepdim)
    out = as_tensor(contiguous(data).astype(a.dtype), a.device)
    return record(out, LinalgVectorNormBackward0, (a,), {"self": a, "result": out},
                  dims=dims, dim=() if dim is None else dims, keepdim=keepdim, ord=p)


def _arg(a: Tensor, dim: int | None, keepdim: bool, is_max: bool) -> Tensor:
    xp = _dev.array_module(a.data)
    fn = xp.argmax if is_max else xp.argmin
    if dim is None:
        idx = fn(a.data.reshape(-1))
        if keepdim:
            idx = xp.asarray(idx).reshape((1,) * a.ndim)
    else:
        idx = fn(a.data, axis=wrap_dim(dim, a.ndim) if a.ndim else None, keepdims=keepdim)
    return as_tensor(xp.asarray(idx).astype(np.int64), a.device)


def argmax(a: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """No gradient: an integer result."""
    return _arg(a, dim, keepdim, True)


def argmin(a: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    return _arg(a, dim, keepdim, False)
