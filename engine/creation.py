"""Tensor creation beyond ``tensor``/``zeros``/``ones``: ``arange``, ``eye``, ``rand``,
``manual_seed`` (the generator ``randn`` and ``rand`` draw from) and the dtypes
(``float32``, ``float64``, ``int64``, ``bool``, ... are NumPy's, which every op takes).

Defaults follow this engine's ``tensor``: a float result has the default dtype
(``dtypes.get_default_dtype``: float64 unless set; PyTorch's is float32) unless a dtype is
given, an integer one int64 as in PyTorch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import device as _dev
from .dtypes import default_dtype
from .tensor import Tensor

float16 = half = np.float16
float32 = float = np.float32  # noqa: A001 - torch's names
float64 = double = np.float64
int32 = int = np.int32  # noqa: A001
int64 = long = np.int64
bool = np.bool_  # noqa: A001
uint8 = np.uint8

_generator = np.random.default_rng()


def manual_seed(seed: Any) -> np.random.Generator:
    """Seed the generator ``randn`` and ``rand`` draw from (values differ from PyTorch's)."""
    global _generator
    _generator = np.random.default_rng(seed.__index__())
    return _generator


def default_generator() -> np.random.Generator:
    return _generator


def _place(arr: np.ndarray, device: str, requires_grad: bool) -> Tensor:
    dev = _dev.canonical(device)
    return Tensor(_dev.to_device_array(arr, dev), requires_grad=requires_grad, device=dev)


def arange(start: Any, end: Any = None, step: Any = 1, dtype: Any = None,
           device: str = "cpu", requires_grad: bool = False) -> Tensor:
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    arr = np.arange(start, end, step, dtype=dtype)
    if dtype is None and arr.dtype.kind == "f":
        arr = arr.astype(default_dtype())
    return _place(arr, device, requires_grad)


def eye(n: Any, m: Any = None, dtype: Any = None, device: str = "cpu",
        requires_grad: bool = False) -> Tensor:
    return _place(np.eye(n, m, dtype=default_dtype() if dtype is None else dtype), device,
                  requires_grad)


def rand(*shape: Any, requires_grad: bool = False, device: str = "cpu",
         dtype: Any = None, generator: np.random.Generator | None = None) -> Tensor:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    rng = generator if generator is not None else _generator
    arr = rng.random(shape).astype(default_dtype() if dtype is None else dtype)
    return _place(arr, device, requires_grad)
