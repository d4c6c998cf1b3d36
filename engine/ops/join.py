"""Joining and splitting: ``cat``, ``stack``, ``split``/``chunk`` (one node with an
output per piece, as ``SplitBackward0`` has) and ``repeat``.

Mirrors ``at::cat``, ``at::stack``, ``at::split``/``split_with_sizes``/``chunk`` and
``at::repeat`` with their nodes and ``derivatives.yaml`` formulas: ``cat`` narrows the
gradient (``SliceBackward0`` in a double backward), ``stack`` selects, ``split``
concatenates the pieces' gradients (zeros for a piece without one, as
``split_backward`` does), ``repeat`` sums the tiles (``repeat_backward``).

``cat`` and ``stack`` promote mixed dtypes by PyTorch's ``promoteTypes`` (``_promoted``:
an integer with a float gives the float, as in ``at::cat``'s ``result_type``).
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import device as _dev
from .. import grad_mode
from ..dtypes import promote_types
from ..graph import collect_next_edges
from ..tensor import Tensor
from .base import Grads, OpNode, as_tensor, as_view, check_same_device, record, wrap_dim
from .indexing import SelectBackward0, SliceBackward0, index_view
from .reduction import sum
from .shape import reshape


def _narrow(g: Tensor, dim: int, start: int, length: int) -> Tensor:
    return index_view(g, (slice(None),) * dim + (slice(start, start + length),),
                        SliceBackward0)


class CatBackward0(OpNode):
    dim: int
    sizes: list[int]  # each input's size along ``dim``

    def apply(self, grads: Grads) -> Grads:
        g, out, start = grads[0], [], 0
        for i, n in enumerate(self.sizes):
            out.append(_narrow(g, self.dim, start, n) if self.should_compute_output(i)
                       else None)
            start += n
        return out


def _promoted(tensors: Sequence[Tensor]) -> Any:
    return functools.reduce(promote_types, [np.dtype(t.dtype) for t in tensors])


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    dev = check_same_device(*tensors)
    d = wrap_dim(dim, tensors[0].ndim)
    dtype = _promoted(tensors)
    xp = _dev.array_module(*[t.data for t in tensors])
    data = xp.concatenate([t.data.astype(dtype) for t in tensors], axis=d)
    return record(as_tensor(data, dev), CatBackward0, tensors,
                  dim=d, sizes=[t.shape[d] for t in tensors])


class StackBackward0(OpNode):
    dim: int
    n: int  # the number of inputs

    def apply(self, grads: Grads) -> Grads:
        g = grads[0]
        full = (slice(None),) * self.dim
        return [index_view(g, full + (i,), SelectBackward0)
                if self.should_compute_output(i) else None for i in range(self.n)]


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    shapes = {t.shape for t in tensors}
    if len(shapes) > 1:
        a, b = tensors[0].shape, next(t.shape for t in tensors if t.shape != tensors[0].shape)
        i = next(i for i, t in enumerate(tensors) if t.shape != a)
        raise RuntimeError(
            f"stack expects each tensor to be equal size, but got {list(a)} at entry 0 and "
            f"{list(b)} at entry {i}")
    dev = check_same_device(*tensors)
    d = wrap_dim(dim, tensors[0].ndim + 1)
    dtype = _promoted(tensors)
    xp = _dev.array_module(*[t.data for t in tensors])
    data = xp.stack([t.data.astype(dtype) for t in tensors], axis=d)
    return record(as_tensor(data, dev), StackBackward0, tensors, dim=d, n=len(tensors))


class SplitBackward0(OpNode):
    """One node, an output per piece; a piece without a gradient contributes zeros."""

    dim: int

    def apply(self, grads: Grads) -> Grads:
        pieces = []
        for g, (shape, dtype, device) in zip(grads, self._input_metadata):
            if g is None:
                with _dev.on_device(device):
                    xp = _dev.array_module(*[x.data for x in grads if x is not None])
                    g = as_tensor(xp.zeros(shape, dtype=dtype), device)
            pieces.append(g)
        return [cat(pieces, self.dim)]


class SplitWithSizesBackward0(SplitBackward0):
    """``split`` with a list of sizes."""


def _split(a: Tensor, sizes: list[int], dim: int,
           node_cls: type[SplitBackward0]) -> tuple[Tensor, ...]:
    outs, start = [], 0
    for n in sizes:
        key = (slice(None),) * dim + (slice(start, start + n),)
        outs.append(as_view(a, as_tensor(a.data[key + (Ellipsis,)], a.device)))
        start += n
    if grad_mode.is_grad_enabled() and a.requires_grad:
        # ``record`` with an output per piece: each piece is output i of the one node
        node = node_cls(dim=dim)
        node.set_next_edges(collect_next_edges(a))
        for i, o in enumerate(outs):
            node.add_input_metadata(o.shape, o.dtype, o.device)
            o.grad_fn, o.output_nr = node, i
    return tuple(outs)


def split(a: Tensor, split_size_or_sections: int | Sequence[int],
          dim: int = 0) -> tuple[Tensor, ...]:
    d = wrap_dim(dim, a.ndim)
    n = a.shape[d]
    if isinstance(split_size_or_sections, (int, np.integer)):
        step = int(split_size_or_sections)
        sizes = [min(step, n - s) for s in range(0, n, step)] if step else [n]
        return _split(a, sizes or [0], d, SplitBackward0)
    sizes = [int(s) for s in split_size_or_sections]
    if builtins.sum(sizes) != n:
        raise RuntimeError(
            f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size "
            f"at dimension {d}), but got split_sizes={sizes}")
    return _split(a, sizes, d, SplitWithSizesBackward0)


def chunk(a: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """``chunk`` is ``split`` with ceil(size / chunks): ``SplitBackward0``."""
    if chunks <= 0:
        raise RuntimeError("chunk expects `chunks` to be greater than 0, got: " + str(chunks))
    n = a.shape[wrap_dim(dim, a.ndim)]
    return split(a, max(-(-n // chunks), 1), dim)


class RepeatBackward0(OpNode):
    """Sum the tiles: the gradient reshaped to (repeat, size) pairs, summed over each
    repeat."""

    repeats: tuple[int, ...]
    self_sizes: tuple[int, ...]

    def apply(self, grads: Grads) -> Grads:
        g, reps, sizes = grads[0], self.repeats, self.self_sizes
        lead = len(reps) - len(sizes)
        padded = (1,) * lead + tuple(sizes)
        split_shape: list[int] = []
        for r, n in zip(reps, padded):
            split_shape += [r, n]
        g = reshape(g, split_shape)
        g = sum(g, tuple(range(0, 2 * len(reps), 2)))
        return [reshape(g, sizes)]


def repeat(a: Tensor, repeats: Sequence[int]) -> Tensor:
    reps = tuple(int(r) for r in repeats)
    if len(reps) < a.ndim:
        raise RuntimeError(
            "Number of dimensions of repeat dims can not be smaller than number of dimensions "
            "of tensor")
    xp = _dev.array_module(a.data)
    data = a.data.reshape((1,) * (len(reps) - a.ndim) + a.shape)
    return record(as_tensor(xp.tile(data, reps), a.device), RepeatBackward0, (a,),
                  repeats=reps, self_sizes=a.shape)

