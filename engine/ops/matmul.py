"""Matrix products: ``mm``, ``dot``, ``mv`` and ``matmul``, which picks one of them by the
operands' dims as ``at::matmul`` does.

Mirrors ``at::mm``, ``at::dot``, ``at::mv`` (``MmBackward0``, ``DotBackward0``,
``MvBackward0``, their ``derivatives.yaml`` formulas) and ``at::matmul``: a 1-D @ 2-D
product is ``a.unsqueeze(0).mm(b).squeeze_(0)`` (``UnsqueezeBackward0``, ``MmBackward0``,
``SqueezeBackward4``), with PyTorch's shape errors.  Operands of three dims or more take
``_matmul_impl``'s two other ways, so the graph has PyTorch's nodes:

- folded (``should_fold``: one operand of 3+ dims, the other of 1 or 2, and the smaller
  one requires grad or the larger one's batch dims are contiguous): the larger operand
  (``mT`` of the right one if it is the larger) reshaped to a matrix, then ``mm`` or ``mv``
  and ``_unsafe_view`` (``UnsafeViewBackward0``), transposed back and made contiguous
  when the right operand was the larger;
- batched: the batch dims broadcast, each operand ``expand``-ed (``ExpandBackward0``) and
  reshaped to 3-D (the reshape ATen would pick from the expanded strides, stride 0 where
  broadcast), ``bmm`` (``BmmBackward0``), ``_unsafe_view`` to the output's shape; a 3-D
  operand with a batch of one that requires grad is squeezed first (``SqueezeBackward1``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..strides import (
    as_strided,
    compute_stride,
    contiguous,
    contiguous_strides,
    element_strides,
    is_contiguous,
)
from ..tensor import Tensor
from .arith import mul
from .base import Grads, OpNode, as_tensor, check_same_device, record
from .reduction import expand
from .shape import ReshapeAliasBackward0, UnsafeViewBackward0, ViewBackward0, _clone, reshape
from .shape import contiguous as contiguous_op
from .views import squeeze, t, transpose, unsqueeze


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


class BmmBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        g = grads[0]
        return [bmm(g, transpose(s["mat2"], 1, 2)) if self.should_compute_output(0) else None,
                bmm(transpose(s["self"], 1, 2), g) if self.should_compute_output(1) else None]


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
    if a.ndim != 2 or b.ndim != 1 or a.shape[1] != b.shape[0]:
        raise RuntimeError(
            f"size mismatch, got input ({a.shape[0]}), mat ({a.shape[0]}x{a.shape[1]}), "
            f"vec ({b.shape[0]})")
    return _mat(a, b, np.matmul, MvBackward0, ("self", "vec"))


def matmul(a: Tensor, b: Tensor) -> Tensor:
    if not isinstance(b, Tensor):
        raise TypeError("matmul(): argument 'other' must be Tensor")
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                           f"{a.ndim}D and {b.ndim}D")
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
    if _should_fold(a, b):
        return _folded(a, b)
    return _batched(a, b)


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


# --- batched matmul (``_matmul_impl``'s fold and bmm ways) -----------------------
def bmm(a: Tensor, b: Tensor) -> Tensor:
    if a.ndim != 3 or b.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor" if a.ndim != 3
                           else "batch2 must be a 3D tensor")
    if b.shape[:2] != (a.shape[0], a.shape[2]):
        raise RuntimeError(
            "Expected size for first two dimensions of batch2 tensor to be: "
            f"[{a.shape[0]}, {a.shape[2]}] but got: [{b.shape[0]}, {b.shape[1]}].")
    return _mat(a, b, np.matmul, BmmBackward0, ("self", "mat2"))


def _strides(a: Tensor) -> tuple[int, ...]:
    data = a.data
    if isinstance(data, np.ndarray):
        return element_strides(data)
    return contiguous_strides(a.shape)  # CuPy: no stride bookkeeping


def _mT(a: Tensor) -> Tensor:
    return transpose(a, -2, -1)


def _unsafe_view(a: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``at::_unsafe_view`` of a contiguous result."""
    return record(as_tensor(a.data.reshape(shape), a.device), UnsafeViewBackward0, (a,),
                  self_sizes=a.shape)


def _should_fold(a: Tensor, b: Tensor) -> bool:
    """``should_fold``: fold the larger operand's batch into ``mm``/``mv`` rows."""
    a_larger = a.ndim >= b.ndim
    t1_shape = a.shape if a_larger else (*b.shape[:-2], b.shape[-1], b.shape[-2])
    small = b if a_larger else a
    if not (len(t1_shape) >= 3 and small.ndim <= 2):
        return False
    if small.requires_grad:
        return True
    if a.ndim == 2:
        return False
    if int(np.prod(t1_shape)) == 0:
        return True
    st = _strides(a) if a_larger else (*_strides(b)[:-2], _strides(b)[-1], _strides(b)[-2])
    return all(st[i] == st[i + 1] * t1_shape[i + 1] for i in range(len(t1_shape) - 2))


def _folded(a: Tensor, b: Tensor) -> Tensor:
    trans = b.ndim > a.ndim
    t1 = _mT(b) if trans else a
    t2 = (t(a) if a.ndim == 2 else a) if trans else b
    out_shape = t1.shape[:-1]
    rows = int(np.prod(out_shape))
    folded = reshape(t1, (rows, t1.shape[-1]))
    if t2.ndim == 2:
        out = _unsafe_view(mm(folded, t2), (*out_shape, t2.shape[1]))
        return contiguous_op(_mT(out)) if trans else out
    return _unsafe_view(mv(folded, t2), out_shape)


def _broadcast(sa: tuple[int, ...], sb: tuple[int, ...]) -> tuple[int, ...]:
    """``infer_size`` of two batch shapes, with its error."""
    nd = max(len(sa), len(sb))
    out = []
    for i in range(nd):
        x = sa[i - nd + len(sa)] if i - nd + len(sa) >= 0 else 1
        y = sb[i - nd + len(sb)] if i - nd + len(sb) >= 0 else 1
        if x != y and x != 1 and y != 1:
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b "
                               f"({y}) at non-singleton dimension {i}")
        out.append(y if x == 1 else x)
    return tuple(out)


def _expand_reshape(a: Tensor, size: tuple[int, ...], shape: tuple[int, ...]) -> Tensor:
    """``a.expand(size).reshape(shape)``, the reshape chosen from the strides ATen's
    expand gives (0 on a broadcast dim), which this engine's expand copy does not keep."""
    e = expand(a, size)
    if e.shape == a.shape:
        return reshape(e, shape)
    st = _strides(a)
    lead = len(size) - a.ndim
    est = tuple(0 if i < lead or (a.shape[i - lead] == 1 and n != 1) else st[i - lead]
                for i, n in enumerate(size))
    if is_contiguous(size, est):
        node: type[OpNode] = ViewBackward0
    elif compute_stride(size, est, shape) is not None:
        node = ReshapeAliasBackward0
    else:
        e = _clone(e, contiguous=True)
        node = UnsafeViewBackward0
    return record(as_tensor(contiguous(e.data).reshape(shape), e.device), node, (e,),
                  self_sizes=e.shape)


def _batched(a: Tensor, b: Tensor) -> Tensor:
    if a.ndim == 3 and b.ndim == 3 and a.shape[0] != b.shape[0]:
        if a.shape[0] == 1 and a.requires_grad:
            return matmul(squeeze(a, 0), b)
        if b.shape[0] == 1 and b.requires_grad:
            return matmul(a, squeeze(b, 0))
    n = a.shape[-2] if a.ndim > 1 else 1
    m1 = a.shape[-1]
    m2 = b.shape[-2] if b.ndim > 1 else b.shape[0]
    p = b.shape[-1] if b.ndim > 1 else 1
    batch = _broadcast(a.shape[:max(a.ndim - 2, 0)], b.shape[:max(b.ndim - 2, 0)])
    nb = int(np.prod(batch))
    a3 = _expand_reshape(a, (*batch, n, m1), (nb, n, m1))
    vector_rhs = b.ndim == 1
    if vector_rhs:
        b3 = unsqueeze(_expand_reshape(b, (*batch, m2), (nb, m2)), 2)
    else:
        b3 = _expand_reshape(b, (*batch, m2, p), (nb, m2, p))
    out_shape = (*batch, *((n,) if a.ndim > 1 else ()), *((p,) if b.ndim > 1 else ()))
    out = bmm(a3, b3)
    return _unsafe_view(squeeze(out, -1) if vector_rhs else out, out_shape)
