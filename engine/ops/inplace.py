"""In-place ops (``add_``, ``sub_``, ``mul_``, ``div_``, ``zero_``, ``fill_``, ``copy_``)
with PyTorch's version counter.

Each writes the out-of-place result into the tensor's own array (views of it see the
change), bumps ``_version`` and, where it records, makes the op's node the tensor's
``grad_fn`` (``rebase_history``): the old history becomes the node's next edge.  A
saved tensor remembers the version it had when saved (``ops_common.OpNode``), so a
backward through a node whose saved tensor was changed since raises PyTorch's error.
As in PyTorch, a leaf that requires grad refuses an in-place op while grad mode is on;
an operand the node saves is saved as a copy of its value before the op (ATen's
``original_self``).

Departures: a view does not share its base's version counter, and an in-place op on a
view does not rewrite the base's history (``CopySlices``).
"""

from __future__ import annotations

from typing import Any

from .. import device as _dev
from .. import grad_mode
from ..graph import InputMetadata
from ..tensor import Tensor
from .arith import add, div, mul, sub
from .base import Grads, OpNode, _new, _record

LEAF_INPLACE = "a leaf Variable that requires grad is being used in an in-place operation."


def _check_leaf(t: Tensor) -> None:
    if grad_mode.is_grad_enabled() and t.grad_fn is None and t._requires_grad:
        raise RuntimeError(LEAF_INPLACE)


def _commit(t: Tensor, r: Tensor) -> Tensor:
    """Write ``r`` into ``t``'s array, bump the version, give ``t`` ``r``'s history."""
    if r.shape != t.shape:
        raise RuntimeError(
            f"output with shape {list(t.shape)} doesn't match the broadcast shape "
            f"{list(r.shape)}")
    node = r.grad_fn
    if node is not None:
        saved = node._saved or {}
        copied = set()
        for k, v in list(saved.items()):  # the operand's value before the op
            if v is t:
                saved[k] = Tensor(v.data.copy(), device=v.device)
                copied.add(k)
        node._saved_versions = [(k, 0, False) if k in copied else (k, v, o)
                                for k, v, o in node._saved_versions]
    t.data[...] = r.data
    t._version += 1
    if node is not None:
        node._input_metadata[0] = InputMetadata(t.shape, t.dtype, t.device)
        t.grad_fn, t.output_nr = node, 0
    return t


def _binary_(t: Tensor, other: Any, fn: Any) -> Tensor:
    _check_leaf(t)
    return _commit(t, fn(t, other))


def add_(t: Tensor, other: Any, alpha: float = 1) -> Tensor:
    return _binary_(t, other if alpha == 1 else mul(other, alpha) if isinstance(
        other, Tensor) else other * alpha, add)


def sub_(t: Tensor, other: Any, alpha: float = 1) -> Tensor:
    return _binary_(t, other if alpha == 1 else mul(other, alpha) if isinstance(
        other, Tensor) else other * alpha, sub)


def mul_(t: Tensor, other: Any) -> Tensor:
    return _binary_(t, other, mul)


def div_(t: Tensor, other: Any) -> Tensor:
    return _binary_(t, other, div)


class ZeroBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        return [mul(grads[0], 0.0)]


class FillBackward2(ZeroBackward0):
    """``fill_(value)``: the old values are gone, their gradient is zero."""


def _fill(t: Tensor, value: float, node_cls: type[OpNode]) -> Tensor:
    _check_leaf(t)
    t.data[...] = value
    t._version += 1
    if grad_mode.is_grad_enabled() and t.requires_grad:
        old = Tensor(t.data, device=t.device)
        old.grad_fn, old.output_nr = t.grad_fn, t.output_nr
        r = _record(_new(t.data, t.device), node_cls, (old,))
        t.grad_fn, t.output_nr = r.grad_fn, 0
    return t


def zero_(t: Tensor) -> Tensor:
    return _fill(t, 0, ZeroBackward0)


def fill_(t: Tensor, value: float) -> Tensor:
    return _fill(t, value, FillBackward2)


class CopyBackwards(OpNode):
    """``copy_(src)``: the gradient goes to ``src`` (as ``src``'s dtype and device, by
    ``validate_outputs``); the old values' gradient is zero."""

    def apply(self, grads: Grads) -> Grads:
        g = grads[0]
        return [mul(g, 0.0) if self.should_compute_output(0) else None,
                g if self.should_compute_output(1) else None]


def copy_(t: Tensor, src: Tensor) -> Tensor:
    _check_leaf(t)
    data = src.data
    if src.device != t.device:  # through the host: a copy between devices
        data = _dev.to_device_array(data, t.device)
    xp = _dev.array_module(t.data)
    t.data[...] = xp.broadcast_to(data, t.shape).astype(t.dtype) if data.shape != t.shape \
        else data.astype(t.dtype)
    t._version += 1
    if grad_mode.is_grad_enabled() and (t.requires_grad or src.requires_grad):
        old = Tensor(t.data, device=t.device)
        old.grad_fn, old.output_nr = t.grad_fn, t.output_nr
        old._requires_grad = False
        r = _record(_new(t.data, t.device), CopyBackwards, (old, src))
        t.grad_fn, t.output_nr = r.grad_fn, 0
    return t



