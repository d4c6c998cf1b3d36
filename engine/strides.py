"""PyTorch's strides, kept on NumPy arrays.

Which backward node an op records can depend on its input's memory layout:
``at::reshape`` records ``ViewBackward0`` for a contiguous input,
``ReshapeAliasBackward0`` when ``computeStride`` finds a view of a
non-contiguous one, else ``CloneBackward0`` + ``UnsafeViewBackward0``.  So the
NumPy arrays under our tensors carry the strides PyTorch would give them: views
(``t``, select, slice, ``reshape``, ``unsqueeze``) are NumPy views with the
same strides, and the outputs of elementwise ops and ``clone`` are laid out as
TensorIterator and ``empty_like`` would lay them out.  The ``ops`` package decides which
op makes which layout; this module holds the layout rules it uses:

==================================  ==================================================
ours                                PyTorch
==================================  ==================================================
``contiguous_strides``              ``c10::contiguous_strides`` (c10/util/strides.h)
``is_contiguous``                   ``_compute_contiguous`` (c10/core/Contiguity.h),
                                    ``TensorImpl::compute_contiguous``
``is_non_overlapping_and_dense``    ``_compute_non_overlapping_and_dense``
                                    (c10/core/Contiguity.h)
``compute_stride``                  ``at::detail::computeStride`` (ATen/TensorUtils.cpp)
``infer_size``                      ``at::infer_size`` (ATen/InferSize.h): one ``-1``
``infer_dense_strides``             ``at::infer_dense_strides`` (ATen/ExpandUtils.cpp)
``elementwise_strides``             TensorIterator's output strides:
                                    ``compute_fast_setup_type``, ``reorder_dimensions``,
                                    ``allocate_or_resize_outputs`` (ATen/TensorIterator.cpp)
``elementwise_layout``              the output TensorIterator allocates, filled
``as_strided``                      ``at::as_strided`` (a view)
``restride``                        ``at::empty_strided`` + ``copy_``
``contiguous``                      ``Tensor::contiguous``
``element_strides``                 ``Tensor::strides`` (NumPy counts bytes)
==================================  ==================================================

Departures:
- There is no storage and no storage offset of our own: a view is a NumPy view
  of its base's buffer, which keeps the offset, and ``as_strided`` takes strides
  relative to the array it views rather than to a storage.
- NumPy strides are in bytes; ``element_strides`` gives PyTorch's (in elements).
- Only NumPy arrays (the CPU and simulated devices) are laid out; CuPy arrays
  keep their own layout (every function here passes them through), so on a real
  GPU ``reshape`` always records ``ViewBackward0``.
- Python scalars are wrapped 0-dim tensors for the layout rules, as in
  TensorIterator; channels-last and other memory formats do not exist here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def element_strides(arr: np.ndarray) -> tuple[int, ...]:
    """Strides in elements."""
    return tuple(s // arr.itemsize for s in arr.strides)


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    out = []
    z = 1
    for n in reversed(shape):
        out.append(z)
        z *= max(n, 1)
    return tuple(reversed(out))


def is_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """``TensorImpl::compute_contiguous``: size-1 dimensions are ignored."""
    if 0 in shape:
        return True
    z = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1:
            if s != z:
                return False
            z *= n
    return True


def is_non_overlapping_and_dense(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """``TensorImpl::compute_non_overlapping_and_dense``."""
    if is_contiguous(shape, strides):
        return True
    if len(shape) == 1:
        return shape[0] < 2 or strides[0] == 1
    perm = sorted(range(len(shape)),
                  key=lambda d: (shape[d] < 2, strides[d] if shape[d] >= 2 else 0))
    require = 1
    for d in perm:
        if shape[d] < 2:
            return True
        if strides[d] != require:
            return False
        require *= shape[d]
    return True


def compute_stride(oldshape: Sequence[int], oldstride: Sequence[int],
                   newshape: Sequence[int]) -> tuple[int, ...] | None:
    """``at::detail::computeStride``: the strides of ``newshape`` as a view, or None."""
    if not oldshape:
        return (1,) * len(newshape)
    numel = int(np.prod(oldshape))
    if numel == 0:
        return tuple(oldstride) if tuple(oldshape) == tuple(newshape) else \
            contiguous_strides(newshape)
    newstride = [0] * len(newshape)
    view_d = len(newshape) - 1
    chunk_base_stride = oldstride[-1]
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(oldshape) - 1, -1, -1):
        tensor_numel *= oldshape[tensor_d]
        if tensor_d == 0 or (oldshape[tensor_d - 1] != 1 and
                             oldstride[tensor_d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or newshape[view_d] == 1):
                newstride[view_d] = view_numel * chunk_base_stride
                view_numel *= newshape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = oldstride[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(newstride)


def infer_size(shape: Sequence[int], numel: int) -> tuple[int, ...]:
    """``infer_size``: resolve one ``-1``."""
    shape = tuple(int(n) for n in shape)
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = int(np.prod([n for n in shape if n != -1])) if shape else 1
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = tuple(numel // known if n == -1 else n for n in shape)
    if int(np.prod(shape)) != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def as_strided(arr: Any, shape: Sequence[int], strides: Sequence[int]) -> Any:
    """A view of ``arr`` with the given shape and strides (in elements)."""
    if not isinstance(arr, np.ndarray):
        return arr.reshape(tuple(shape))
    return np.lib.stride_tricks.as_strided(
        arr, tuple(shape), tuple(s * arr.itemsize for s in strides))


def restride(arr: Any, strides: Sequence[int] | None) -> Any:
    """``arr``'s values laid out with ``strides`` (None: contiguous); a copy if needed."""
    if not isinstance(arr, np.ndarray):
        return arr
    if strides is None:
        strides = contiguous_strides(arr.shape)
    strides = tuple(strides)
    if element_strides(arr) == strides:
        return arr
    if arr.size == 0:
        return np.empty(arr.shape, dtype=arr.dtype)
    size = 1 + sum((n - 1) * s for n, s in zip(arr.shape, strides))
    out = as_strided(np.empty(size, dtype=arr.dtype), arr.shape, strides)
    out[...] = arr
    return out


def contiguous(arr: Any) -> Any:
    return restride(np.asarray(arr) if isinstance(arr, np.generic) else arr, None)


def elementwise_strides(shape: tuple[int, ...], operands: Sequence[Any]) -> tuple[int, ...]:
    """The output strides TensorIterator gives an out-of-place elementwise op.

    ``operands`` are the inputs in order (NumPy arrays; Python scalars are
    wrapped 0-dim tensors).  Port of ``compute_fast_setup_type`` and
    ``reorder_dimensions`` / ``allocate_or_resize_outputs``."""
    # fast path: same shapes, all contiguous (NumPy's C_CONTIGUOUS flag ignores
    # size-1 dimensions, as ``is_contiguous`` does)
    if all(isinstance(o, np.ndarray) and o.shape == shape and o.flags.c_contiguous
                    for o in operands):
        return contiguous_strides(shape)
    infos = [(tuple(o.shape), element_strides(o)) if isinstance(o, np.ndarray) else ((), ())
             for o in operands]
    nd = len(shape)
    if all(s == infos[0][0] for s, _ in infos):  # all_ops_same_shape_
        if all(is_contiguous(s, st) for s, st in infos):
            return contiguous_strides(shape)
        if all(is_non_overlapping_and_dense(s, st) for s, st in infos) and \
                all(st == infos[-1][1] for _, st in infos):
            return infos[-1][1]
    if nd <= 1:
        return contiguous_strides(shape)
    aligned = []
    for s, st in infos:
        off = nd - len(s)
        v = [0] * nd
        for i in range(len(s)):
            v[off + i] = 0 if s[i] == 1 and shape[off + i] != 1 else st[i]
        aligned.append(v)

    def should_swap(d0: int, d1: int) -> int:
        for v in aligned:
            s0, s1 = v[d0], v[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 < s1:
                return -1
            if s0 > s1:
                return 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    perm = list(range(nd - 1, -1, -1))  # perm[0] is the fastest-moving dimension
    for i in range(1, nd):
        dim1 = i
        for dim0 in range(i - 1, -1, -1):
            c = should_swap(perm[dim0], perm[dim1])
            if c > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif c < 0:
                break
    if perm == list(range(nd - 1, -1, -1)):
        return contiguous_strides(shape)
    out = [0] * nd
    running = 1
    for d in perm:
        out[d] = running
        running *= shape[d]
    return tuple(out)


def elementwise_layout(result: Any, *operands: Any) -> Any:
    """Lay ``result`` (an elementwise op's output) out as PyTorch would."""
    if not isinstance(result, np.ndarray):
        return np.asarray(result) if isinstance(result, np.generic) else result
    return restride(result, elementwise_strides(result.shape, operands))


def infer_dense_strides(shape: Sequence[int], strides: Sequence[int]) -> tuple[int, ...]:
    """``infer_dense_strides``: dense strides keeping the input's dimension order."""
    nd = len(shape)
    perm = list(range(nd - 1, -1, -1))

    def should_swap(d0: int, d1: int) -> int:
        s0, s1 = strides[d0], strides[d1]
        if s0 == 0 or s1 == 0:
            return 0
        if s0 < s1:
            return -1
        if s0 > s1:
            return 1
        return 1 if shape[d0] > shape[d1] else 0

    for i in range(1, nd):
        dim1 = i
        for dim0 in range(i - 1, -1, -1):
            c = should_swap(perm[dim0], perm[dim1])
            if c > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif c < 0:
                break
    out = [0] * nd
    running = 1
    for d in perm:
        out[d] = running
        if shape[d] > 1:
            running *= shape[d]
    return tuple(out)
