"""In-place ops (``add_``, ``sub_``, ``mul_``, ``div_``, ``zero_``, ``fill_``, ``copy_``)
with PyTorch's version counter.

``Tensor``'s ``+= -= *= /=`` are ``add_``, ``sub_``, ``mul_``, ``div_``, as in PyTorch.
Each writes the out-of-place result into the tensor's own array (views of it see the
change), bumps ``_version`` and, where it records, makes the op's node the tensor's
``grad_fn`` (``rebase_history``): the old history becomes the node's next edge, and a
``retain_grad`` hook moves to the new node.  A
saved tensor remembers the version it had when saved (``base.OpNode``), so a
backward through a node whose saved tensor was changed since raises PyTorch's error.
As in PyTorch, a leaf that requires grad refuses an in-place op while grad mode is on;
an op whose node saves ``self`` (``mul_``, ``div_``) computes from a copy of the value
before the op (ATen's ``original_self``), so the node is made with what it keeps.

Mirrors ``at::add_`` and the other in-place ops, ``VariableVersion``, ``rebase_history``
and ``check_inplace`` (the leaf error, word for word).

A view shares its base's version counter (``base.as_view``), so an in-place op on a view
(or on a ``detach()``) is seen by a node that saved the base.

Departures: an in-place op on a view does not rewrite the base's history (``CopySlices``).
"""

from __future__ import annotations

from typing import Any

from .. import device as _dev
from .. import grad_mode
from ..dtypes import check_can_cast
from ..graph import InputMetadata
from ..tensor import Tensor
from .arith import add, div, mul, sub
from .base import Grads, OpNode, as_tensor, record

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
    t.data[...] = r.data
    t._version += 1
    node = r.grad_fn
    if node is not None:  # rebase_history: the node's input is now ``t`` itself
        node._input_metadata[0] = InputMetadata(t.shape, t.dtype, t.device)
        _rebase(t, node)
    return t


def _rebase(t: Tensor, node: Any) -> None:
    """``t`` gets ``node``'s history; a ``retain_grad`` hook moves with it from the old
    ``grad_fn`` to the new one (``VariableHooks::retain_grad`` is keyed by the tensor, so
    ``t.grad`` is the gradient of ``t`` after the op, as in PyTorch)."""
    old, old_nr = t.grad_fn, t.output_nr
    t.grad_fn, t.output_nr = node, 0
    if t._retains_grad and old is not None and old is not node:
        hook = old._retains_grad_hooks.pop(old_nr, None)
        if hook is not None:
            node._retains_grad_hooks[0] = hook


def _original(t: Tensor) -> Tensor:
    """``original_self``: ``t``'s value before the op, with ``t``'s history (so the same
    edge), for a node to save; nothing else holds it, so it stays at version 0."""
    copy = Tensor(t.data.copy(), device=t.device)
    copy.grad_fn, copy.output_nr = t.grad_fn, t.output_nr
    copy._requires_grad = t._requires_grad
    return copy


def _cast_checked(fn: Any, t: Tensor) -> Any:
    """``fn`` whose result (in the op's common dtype) must cast to ``t``'s dtype: the
    check ``TensorIterator`` makes after the op's own checks and the shapes'."""
    def op(a: Tensor, other: Any) -> Tensor:
        r = fn(a, other)
        if r.shape == t.shape:
            check_can_cast(r.dtype, t.dtype)
        return r

    return op


def _binary_(t: Tensor, other: Any, fn: Any, saves_self: bool) -> Tensor:
    _check_leaf(t)
    fn = _cast_checked(fn, t)
    if saves_self and grad_mode.is_grad_enabled() and (
            t.requires_grad or getattr(other, "requires_grad", False)):
        # only ``self`` is the value before the op: an ``other`` that is ``t`` itself is
        # saved as it is, so its version check fails after the op, as in PyTorch
        return _commit(t, fn(_original(t), other))
    return _commit(t, fn(t, other))


def add_(t: Tensor, other: Any, alpha: float = 1) -> Tensor:
    return _binary_(t, other if alpha == 1 else mul(other, alpha) if isinstance(
        other, Tensor) else other * alpha, add, saves_self=False)


def sub_(t: Tensor, other: Any, alpha: float = 1) -> Tensor:
    return _binary_(t, other if alpha == 1 else mul(other, alpha) if isinstance(
        other, Tensor) else other * alpha, sub, saves_self=False)


def mul_(t: Tensor, other: Any) -> Tensor:
    return _binary_(t, other, mul, saves_self=True)


def div_(t: Tensor, other: Any) -> Tensor:
    return _binary_(t, other, div, saves_self=True)


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
        r = record(as_tensor(t.data, t.device), node_cls, (old,))
        _rebase(t, r.grad_fn)
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
        r = record(as_tensor(t.data, t.device), CopyBackwards, (old, src))
        _rebase(t, r.grad_fn)
    return t
