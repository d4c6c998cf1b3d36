"""The default dtype and PyTorch's type promotion.

Mirrors ``torch.set_default_dtype``/``torch.get_default_dtype`` and ATen's
``at::result_type`` (``ResultTypeState``, ``update_result_type_state``,
``combine_categories`` in ``TypeProperties.cpp``): an op's operands are dimensioned
tensors, 0-dim tensors or wrapped numbers (Python scalars), in that priority; within one
priority dtypes promote by ``promoteTypes``; a lower-priority operand counts only if its
category (bool < integer < float) is higher, and then gives its own dtype (a Python float
gives the default dtype).  True division of integers gives the default float dtype.

Departures: the default dtype is float64 (the engine's documented choice, for teaching)
until a program calls ``set_default_dtype``; PyTorch's is float32.  ``promoteTypes`` is
NumPy's ``promote_types`` within a category (they agree there) and the higher category
across categories (PyTorch: ``int64 + float16`` is float16, NumPy's float64).

Fast path (the backward pass calls a binary op per node, most of them on two tensors of
one dtype): ``binary_result_type`` answers two tensors of one dtype with that dtype at once
(whatever their dims, the rules above give it), and a Python scalar of the tensor's
category or lower by its type (it takes the tensor's dtype); only the other cases go
through the rules in full (``_result_type``).  ``result_type`` of two operands, the first a
tensor, and so ``float_result_type`` (``div``), go through it; ``elementwise`` does the
same checks inline.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_BOOL = np.dtype(np.bool_)
_INT64 = np.dtype(np.int64)
_default: np.dtype = np.dtype(np.float64)


def set_default_dtype(d: Any) -> None:
    """``torch.set_default_dtype``: float16, float32 or float64 (what Python floats, and
    factories given no dtype, make)."""
    global _default
    msg = "only floating-point types are supported as the default type"
    if not (isinstance(d, np.dtype) or isinstance(d, type) and issubclass(d, np.generic)):
        raise TypeError(f"invalid dtype object: {msg}")
    dt = np.dtype(d)
    if dt.kind != "f":
        raise TypeError(msg)
    _default = dt


def get_default_dtype() -> Any:
    """``torch.get_default_dtype``: the dtype Python floats become (float64 unless set)."""
    return _default.type


def default_dtype() -> np.dtype:
    """The default dtype as a ``np.dtype`` (for the ops)."""
    return _default


def _category(dt: np.dtype) -> int:
    return 0 if dt.kind == "b" else 1 if dt.kind in "iu" else 2


def promote_types(a: np.dtype, b: np.dtype) -> np.dtype:
    """``c10::promoteTypes``."""
    if a == b:
        return a
    ca, cb = _category(a), _category(b)
    if ca == cb:
        return np.promote_types(a, b)
    return a if ca > cb else b


def scalar_dtype(x: Any) -> np.dtype:
    """The dtype a wrapped number has in ``update_result_type_state``."""
    if isinstance(x, (bool, np.bool_)):
        return _BOOL
    if isinstance(x, (int, np.integer)):
        return _INT64
    return _default


def _combine(higher: np.dtype | None, lower: np.dtype | None) -> np.dtype | None:
    """``combine_categories``."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.kind == "f":
        return higher
    if higher.kind == "b" or lower.kind == "f":
        return promote_types(higher, lower)
    return higher


def result_type(*operands: Any) -> np.dtype:
    """``at::result_type`` of Tensors (anything with ``.data``) and Python scalars."""
    if len(operands) == 2:
        a = operands[0]
        if getattr(getattr(a, "data", None), "dtype", None) is not None \
                and not isinstance(a, np.generic):
            return binary_result_type(a, operands[1])
    return _result_type(operands)


def _result_type(operands: tuple[Any, ...]) -> np.dtype:
    """``result_type``'s rules in full (``update_result_type_state`` per operand)."""
    dim = zero = wrapped = None
    for x in operands:
        data = getattr(x, "data", None)
        if data is not None and hasattr(data, "dtype") and not isinstance(x, np.generic):
            dt = data.dtype
            if data.ndim:
                dim = dt if dim is None else promote_types(dim, dt)
            else:
                zero = dt if zero is None else promote_types(zero, dt)
        else:
            dt = scalar_dtype(x)
            wrapped = dt if wrapped is None else promote_types(wrapped, dt)
    out = _combine(_combine(dim, zero), wrapped)
    return out if out is not None else _default


def float_result_type(*operands: Any) -> np.dtype:
    """``result_type`` with integer and bool results raised to the default float
    (``promote_integer_inputs_to_float``: true division, ``reciprocal``)."""
    dt = result_type(*operands)
    return dt if dt.kind == "f" else _default


def check_can_cast(common: np.dtype, out: np.dtype) -> None:
    """``canCast`` for an in-place op's result: a float result can't go into an integer
    or bool tensor, an integer one into a bool tensor."""
    if _category(common) > _category(out):
        raise RuntimeError(f"result type {_name(common)} can't be cast to the desired "
                           f"output type {_name(out)}")


def _name(dt: np.dtype) -> str:
    from .ops.base import dtype_name

    return dtype_name(dt)


def binary_result_type(a: Any, b: Any) -> np.dtype:
    """``result_type(a, b)`` for a Tensor ``a``, with the usual cases (one dtype, or a
    Python scalar of ``a``'s category or lower) answered without the full rules."""
    dt = a.data.dtype
    tb = type(b)
    if tb is float:
        if dt.kind == "f":
            return dt
    elif tb is int:
        if dt.kind != "b":
            return dt
    elif tb is bool:
        return dt
    else:
        bd = getattr(b, "data", None)
        if bd is not None and getattr(bd, "dtype", None) is not None and bd.dtype == dt \
                and not isinstance(b, np.generic):
            return dt
    return _result_type((a, b))
