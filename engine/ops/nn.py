"""Neural-network ops: ``softmax``, ``log_softmax``, ``mse_loss``, ``nll_loss`` and
``cross_entropy`` (``log_softmax`` then ``nll_loss``, as ATen composes it, so the graph
is ``NllLossBackward0`` -> ``LogSoftmaxBackward0``).  Formulas from
``derivatives.yaml`` (``_softmax_backward_data``, ``_log_softmax_backward_data``,
``mse_loss_backward``, ``nll_loss_backward``), written with Tensor ops.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import device as _dev
from .. import grad_mode
from ..tensor import Tensor
from .arith import exp, mul, rsub, sub
from .base import Grads, OpNode, _new, _record
from .pointwise import _mask
from .reduction import sum
from .shape import expand
from .views import _wrap_dim

_REDUCTIONS = ("mean", "sum", "none")


class SoftmaxBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        g, y = grads[0], self.saved()["result"]
        return [mul(y, sub(g, sum(mul(g, y), self._dim, keepdim=True)))]


class LogSoftmaxBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        g, y = grads[0], self.saved()["result"]
        return [sub(g, mul(exp(y), sum(g, self._dim, keepdim=True)))]


def _softmax(a: Tensor, dim: int, log: bool) -> Tensor:
    d = _wrap_dim(dim, a.ndim)
    axis = d if a.ndim else None
    xp = _dev.array_module(a.data)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        shifted = a.data - a.data.max(axis=axis, keepdims=True)
        e = np.exp(shifted)
        total = e.sum(axis=axis, keepdims=True)
        data = shifted - np.log(total) if log else e / total
    out = _new(xp.asarray(data).astype(a.dtype), a.device)
    need = grad_mode.is_grad_enabled() and a.requires_grad
    out = _record(out, LogSoftmaxBackward0 if log else SoftmaxBackward0, (a,),
                  **({"result": out} if need else {}))
    if out.grad_fn is not None:
        out.grad_fn._dim = d  # type: ignore[attr-defined]
    return out


def softmax(a: Tensor, dim: int) -> Tensor:
    return _softmax(a, dim, False)


def log_softmax(a: Tensor, dim: int) -> Tensor:
    return _softmax(a, dim, True)


class MseLossBackward0(OpNode):
    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        x, y = s["self"], s["target"]
        scale = 2.0 / max(x.numel(), 1) if self._reduction == "mean" else 2.0
        d = mul(mul(sub(x, y), scale), grads[0])
        return [d if self.should_compute_output(0) else None,
                mul(d, -1.0) if self.should_compute_output(1) else None]


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:  # noqa: A002
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    with np.errstate(all="ignore"):
        diff = input.data - target.data
        sq = diff * diff
    data = sq.mean() if reduction == "mean" else sq.sum() if reduction == "sum" else sq
    xp = _dev.array_module(input.data, target.data)
    out = _new(xp.asarray(data), input.device)
    need = grad_mode.is_grad_enabled() and (input.requires_grad or target.requires_grad)
    out = _record(out, MseLossBackward0, (input, target),
                  **({"self": input, "target": target} if need else {}))
    if out.grad_fn is not None:
        out.grad_fn._reduction = reduction  # type: ignore[attr-defined]
    return out


class NllLossBackward0(OpNode):
    """``-grad`` (over the count of targets for ``mean``) at each target's class."""

    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        x, onehot = s["self"], s["onehot"]
        g = grads[0]
        if self._reduction == "none" and x.ndim == 2:
            g = expand(g.reshape(x.shape[0], 1), x.shape)
        else:
            g = expand(g, x.shape)
        w = rsub(_mask(onehot.data, g), 0.0)  # -onehot
        if self._reduction == "mean":  # over the count of targets, kept on the device
            xp = _dev.array_module(onehot.data)
            count = xp.maximum(onehot.data.sum(), 1).astype(g.dtype)
            w = mul(w, _new(xp.asarray(1.0 / count).astype(g.dtype), g.device))
        return [mul(g, w)]


def nll_loss(input: Tensor, target: Tensor, reduction: str = "mean",  # noqa: A002
             ignore_index: int = -100) -> Tensor:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if target.dtype.kind not in "iu":
        raise NotImplementedError("nll_loss: this engine takes class-index targets")
    xp = _dev.array_module(input.data, target.data)
    x2 = input.data if input.ndim == 2 else input.data.reshape(1, -1)
    t = target.data.reshape(-1)
    n, c = x2.shape
    bad = (t != ignore_index) & ((t < 0) | (t >= c))
    if bool(bad.any()):
        raise IndexError(f"Target {int(_dev.to_numpy(t)[_dev.to_numpy(bad)][0])} is out of "
                         "bounds.")
    valid = t != ignore_index
    onehot = (xp.arange(c).reshape(1, c) == t.reshape(n, 1)) & valid.reshape(n, 1)
    picked = -(x2 * onehot.astype(x2.dtype)).sum(axis=1)
    if reduction == "none":
        data = picked if input.ndim == 2 else picked.reshape(())
    elif reduction == "sum":
        data = picked.sum()
    else:
        data = picked.sum() / xp.maximum(valid.sum(), 1)
    out = _new(xp.asarray(data).astype(input.dtype), input.device)
    need = grad_mode.is_grad_enabled() and input.requires_grad
    mask = _new(onehot if input.ndim == 2 else onehot.reshape(c), input.device)
    out = _record(out, NllLossBackward0, (input,),
                  **({"self": input, "onehot": mask} if need else {}))
    if out.grad_fn is not None:
        out.grad_fn._reduction = reduction  # type: ignore[attr-defined]
    return out


def cross_entropy(input: Tensor, target: Tensor, reduction: str = "mean",  # noqa: A002
                  ignore_index: int = -100) -> Any:
    dim = 1 if input.ndim >= 2 else 0
    return nll_loss(log_softmax(input, dim), target, reduction, ignore_index)
