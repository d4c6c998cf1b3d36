"""``TensorMethods``: the Tensor methods of the op families beyond the arithmetic
(shapes, reductions, nn, conversions, in-place ops), forwarded to the ``ops`` package.
A base class of ``Tensor`` (no slots of its own), so that ``tensor.py`` stays about its
metadata.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .tensor import Tensor


def _ops() -> ModuleType:
    """The ``ops`` package, imported on first use: the ops make Tensors and ``Tensor`` is
    built on this class, so ``ops`` cannot load before this module has (the one cycle of
    the tensor/ops core)."""
    from . import ops

    return ops


class TensorMethods:
    __slots__ = ()
    data: Any
    device: str

    def sqrt(self) -> Tensor:
        return _ops().sqrt(self)

    def abs(self) -> Tensor:
        return _ops().abs(self)

    __abs__ = abs

    def sin(self) -> Tensor:
        return _ops().sin(self)

    def cos(self) -> Tensor:
        return _ops().cos(self)

    def square(self) -> Tensor:
        return _ops().square(self)

    def clamp(self, min: float | None = None, max: float | None = None) -> Tensor:  # noqa: A002
        return _ops().clamp(self, min, max)

    clip = clamp

    def max(self, dim: Any = None, keepdim: bool = False) -> Any:
        return _ops().max(self, dim, keepdim)

    def min(self, dim: Any = None, keepdim: bool = False) -> Any:
        return _ops().min(self, dim, keepdim)

    def argmax(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        return _ops().argmax(self, dim, keepdim)

    def argmin(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        return _ops().argmin(self, dim, keepdim)

    def norm(self, p: float = 2, dim: Any = None, keepdim: bool = False) -> Tensor:
        return _ops().norm(self, p, dim, keepdim)

    def softmax(self, dim: int) -> Tensor:
        return _ops().softmax(self, dim)

    def log_softmax(self, dim: int) -> Tensor:
        return _ops().log_softmax(self, dim)

    def masked_fill(self, mask: Tensor, value: float) -> Tensor:
        return _ops().masked_fill(self, mask, value)

    def eq(self, o: Any) -> Tensor:
        return _ops().eq(self, o)

    def ne(self, o: Any) -> Tensor:
        return _ops().ne(self, o)

    def lt(self, o: Any) -> Tensor:
        return _ops().lt(self, o)

    def le(self, o: Any) -> Tensor:
        return _ops().le(self, o)

    def gt(self, o: Any) -> Tensor:
        return _ops().gt(self, o)

    def ge(self, o: Any) -> Tensor:
        return _ops().ge(self, o)

    def unsqueeze(self, dim: int) -> Tensor:
        return _ops().unsqueeze(self, dim)

    def squeeze(self, dim: Any = None) -> Tensor:
        return _ops().squeeze(self, dim)

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        return _ops().transpose(self, dim0, dim1)

    def permute(self, *dims: Any) -> Tensor:
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        return _ops().permute(self, dims)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        return _ops().flatten(self, start_dim, end_dim)

    def repeat(self, *sizes: Any) -> Tensor:
        if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
            sizes = tuple(sizes[0])
        return _ops().repeat(self, sizes)

    def split(self, split_size: Any, dim: int = 0) -> tuple[Tensor, ...]:
        return _ops().split(self, split_size, dim)

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        return _ops().chunk(self, chunks, dim)

    def contiguous(self) -> Tensor:
        return _ops().contiguous(self)

    def float(self) -> Tensor:
        return _ops().to(self, None, np.float32)

    def double(self) -> Tensor:
        return _ops().to(self, None, np.float64)

    def long(self) -> Tensor:
        return _ops().detached(self, np.int64)

    def bool(self) -> Tensor:
        return _ops().detached(self, np.bool_)

    def type_as(self, other: Tensor) -> Tensor:
        return _ops().to(self, None, other.dtype)

    # --- in place (``ops/inplace.py``: the version counter) --------------------------------
    def add_(self, o: Any, alpha: float = 1) -> Tensor:
        return _ops().add_(self, o, alpha)

    def sub_(self, o: Any, alpha: float = 1) -> Tensor:
        return _ops().sub_(self, o, alpha)

    def mul_(self, o: Any) -> Tensor:
        return _ops().mul_(self, o)

    def div_(self, o: Any) -> Tensor:
        return _ops().div_(self, o)

    def zero_(self) -> Tensor:
        return _ops().zero_(self)

    def fill_(self, value: float) -> Tensor:
        return _ops().fill_(self, value)

    def copy_(self, src: Tensor) -> Tensor:
        return _ops().copy_(self, src)


    # ``x += y`` is ``x.add_(y)`` as in PyTorch: the same object, changed in place (so
    # ``with no_grad(): w -= lr * w.grad`` keeps ``w`` the leaf it was)
    def __iadd__(self, o: Any) -> Tensor:
        return _ops().add_(self, o)

    def __isub__(self, o: Any) -> Tensor:
        return _ops().sub_(self, o)

    def __imul__(self, o: Any) -> Tensor:
        return _ops().mul_(self, o)

    def __itruediv__(self, o: Any) -> Tensor:
        return _ops().div_(self, o)
