"""Neural-network ops (``torch.nn.functional``): ``softmax``, ``log_softmax``,
``mse_loss``, ``nll_loss``, ``cross_entropy`` (``log_softmax`` then ``nll_loss``, as ATen
composes it, so the graph is ``NllLossBackward0`` -> ``LogSoftmaxBackward0``) and
``linear``.

Mirrors ATen's ops and their ``derivatives.yaml`` formulas (``_softmax_backward_data``,
``_log_softmax_backward_data``, ``mse_loss_backward``, ``nll_loss_backward``), written
with Tensor ops, with PyTorch's argument errors.  ``_softmax_backward_data``,
``_log_softmax_backward_data`` and ``mse_loss_backward`` are ops of their own, as in ATen,
so a double backward records ``SoftmaxBackwardDataBackward0``,
``LogSoftmaxBackwardDataBackward0`` and ``MseLossBackwardBackward0``.

Departures: ``linear`` is one ``LinearBackward0`` node with three inputs (input, weight,
bias), the seeds' LinearFunction, where PyTorch records ``TBackward0`` +
``AddmmBackward0``; ``nll_loss`` takes class-index targets only, without class weights.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import device as _dev
from ..strides import contiguous
from ..tensor import Tensor
from .arith import mul, neg, rsub, sub
from .base import Grads, OpNode, as_tensor, check_same_device, mask_of, record, wrap_dim
from .matmul import mm
from .pointwise import exp
from .reduction import expand, sum
from .shape import reshape
from .views import t

_REDUCTIONS = ("mean", "sum", "none")


class SoftmaxBackward0(OpNode):
    dim: int

    def apply(self, grads: Grads) -> Grads:
        return [softmax_backward_data(grads[0], self.saved()["result"], self.dim)]


class LogSoftmaxBackward0(OpNode):
    dim: int

    def apply(self, grads: Grads) -> Grads:
        return [log_softmax_backward_data(grads[0], self.saved()["result"], self.dim)]


# ``_softmax_backward_data``, ``_log_softmax_backward_data``: ops of their own, so a double
# backward records PyTorch's nodes (their formulas are derivatives.yaml's).
class SoftmaxBackwardDataBackward0(OpNode):
    dim: int

    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        gg, go, y, d = grads[0], s["grad_output"], s["output"], self.dim
        ggo = softmax_backward_data(gg, y, d) if self.should_compute_output(0) else None
        gy = None
        if self.should_compute_output(1):  # softmax_double_backward
            gy = sub(sub(mul(go, gg), mul(sum(mul(y, go), d, keepdim=True), gg)),
                     mul(go, sum(mul(y, gg), d, keepdim=True)))
        return [ggo, gy]


class LogSoftmaxBackwardDataBackward0(OpNode):
    dim: int

    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        gg, go, y, d = grads[0], s["grad_output"], s["output"], self.dim
        ggo = (sub(gg, sum(mul(gg, exp(y)), d, keepdim=True))
               if self.should_compute_output(0) else None)
        gy = (mul(mul(neg(sum(go, d, keepdim=True)), exp(y)), gg)
              if self.should_compute_output(1) else None)
        return [ggo, gy]


def _backward_data(go: Tensor, y: Tensor, dim: int, log: bool) -> Tensor:
    axis = dim if y.ndim else None
    with np.errstate(over="ignore", invalid="ignore"):
        if log:
            data = go.data - np.exp(y.data) * go.data.sum(axis=axis, keepdims=True)
        else:
            data = y.data * (go.data - (go.data * y.data).sum(axis=axis, keepdims=True))
    out = as_tensor(contiguous(data).astype(y.dtype), y.device)
    node = LogSoftmaxBackwardDataBackward0 if log else SoftmaxBackwardDataBackward0
    return record(out, node, (go, y), {"grad_output": go, "output": y}, dim=dim)


def softmax_backward_data(grad_output: Tensor, output: Tensor, dim: int) -> Tensor:
    """``_softmax_backward_data``: ``output * (grad_output - (grad_output * output).sum(dim))``."""
    return _backward_data(grad_output, output, dim, False)


def log_softmax_backward_data(grad_output: Tensor, output: Tensor, dim: int) -> Tensor:
    """``_log_softmax_backward_data``: ``grad_output - exp(output) * grad_output.sum(dim)``."""
    return _backward_data(grad_output, output, dim, True)


def _softmax(a: Tensor, dim: int, log: bool) -> Tensor:
    d = wrap_dim(dim, a.ndim)
    axis = d if a.ndim else None
    xp = _dev.array_module(a.data)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        shifted = a.data - a.data.max(axis=axis, keepdims=True)
        e = np.exp(shifted)
        total = e.sum(axis=axis, keepdims=True)
        data = shifted - np.log(total) if log else e / total
    out = as_tensor(xp.asarray(data).astype(a.dtype), a.device)
    return record(out, LogSoftmaxBackward0 if log else SoftmaxBackward0, (a,), {"result": out},
                  dim=d)


def softmax(a: Tensor, dim: int) -> Tensor:
    return _softmax(a, dim, False)


def log_softmax(a: Tensor, dim: int) -> Tensor:
    return _softmax(a, dim, True)


class MseLossBackward0(OpNode):
    reduction: str

    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        x, y, r = s["self"], s["target"], self.reduction
        return [mse_loss_backward(grads[0], x, y, r) if self.should_compute_output(0) else None,
                mse_loss_backward(grads[0], y, x, r) if self.should_compute_output(1) else None]


class MseLossBackwardBackward0(OpNode):
    """``mse_loss_backward``'s own derivatives (``mse_loss_double_backward``...)."""

    reduction: str

    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        gg, go, x, y, r = grads[0], s["grad_output"], s["self"], s["target"], self.reduction
        scale = 2.0 / max(x.numel(), 1) if r == "mean" else 2.0
        ggo = None
        if self.should_compute_output(0):
            if r == "none":
                ggo = mse_loss_backward(gg, x, y, r)
            else:
                ones = as_tensor(_dev.array_module(go.data).ones_like(go.data), go.device)
                ggo = sum(mul(mse_loss_backward(ones, x, y, r), gg))
        gx = mul(mul(gg, go), scale) if self.should_compute_output(1) else None
        gy = neg(mul(mul(gg, go), scale)) if self.should_compute_output(2) else None
        return [ggo, gx, gy]


def mse_loss_backward(grad_output: Tensor, a: Tensor, target: Tensor, reduction: str) -> Tensor:
    """``2 * (self - target) * grad_output``, over ``numel`` for ``mean``."""
    scale = 2.0 / max(a.numel(), 1) if reduction == "mean" else 2.0
    with np.errstate(all="ignore"):
        data = (a.data - target.data) * scale * grad_output.data
    out = as_tensor(contiguous(data).astype(a.dtype), a.device)
    return record(out, MseLossBackwardBackward0, (grad_output, a, target),
                  {"grad_output": grad_output, "self": a, "target": target},
                  reduction=reduction)


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:  # noqa: A002
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    with np.errstate(all="ignore"):
        diff = input.data - target.data
        sq = diff * diff
    data = sq.mean() if reduction == "mean" else sq.sum() if reduction == "sum" else sq
    xp = _dev.array_module(input.data, target.data)
    out = as_tensor(xp.asarray(data), input.device)
    return record(out, MseLossBackward0, (input, target), {"self": input, "target": target},
                  reduction=reduction)


class NllLossBackward0(OpNode):
    """``-grad`` (over the count of targets for ``mean``) at each target's class."""

    reduction: str

    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        x, onehot = s["self"], s["onehot"]
        g = grads[0]
        if self.reduction == "none" and x.ndim == 2:
            g = expand(g.reshape(x.shape[0], 1), x.shape)
        else:
            g = expand(g, x.shape)
        w = rsub(mask_of(onehot.data, g), 0.0)  # -onehot
        if self.reduction == "mean":  # over the count of targets, kept on the device
            xp = _dev.array_module(onehot.data)
            count = xp.maximum(onehot.data.sum(), 1).astype(g.dtype)
            w = mul(w, as_tensor(xp.asarray(1.0 / count).astype(g.dtype), g.device))
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
    out = as_tensor(xp.asarray(data).astype(input.dtype), input.device)
    mask = as_tensor(onehot if input.ndim == 2 else onehot.reshape(c), input.device)
    return record(out, NllLossBackward0, (input,), {"self": input, "onehot": mask},
                  reduction=reduction)


def cross_entropy(input: Tensor, target: Tensor, reduction: str = "mean",  # noqa: A002
                  ignore_index: int = -100) -> Any:
    dim = 1 if input.ndim >= 2 else 0
    return nll_loss(log_softmax(input, dim), target, reduction, ignore_index)


# --- linear --------------------------------------------------------------------
class LinearBackward0(OpNode):
    """One node, three inputs (input, weight, bias): the seeds' LinearFunction."""

    def apply(self, grads: Grads) -> Grads:
        s = self.saved()
        g, x, w = grads[0], s["input"], s["weight"]
        gx = gw = gb = None
        g2 = reshape(g, (1, -1)) if g.ndim == 1 else g
        x2 = reshape(x, (1, -1)) if x.ndim == 1 else x
        if self.should_compute_output(0):
            gx = mm(g2, w)
            if x.ndim == 1:
                gx = reshape(gx, x.shape)
        if self.should_compute_output(1):
            gw = mm(t(g2), x2)
        if self.should_compute_output(2):
            gb = g  # validate_outputs sums the batch dimension away
        return [gx, gw, gb]


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    if x.ndim not in (1, 2) or weight.ndim != 2:
        raise RuntimeError("linear(): input must be 1-D or 2-D and weight 2-D")
    dev = check_same_device(x, weight, *( [bias] if bias is not None else []))
    if x.shape[-1] != weight.shape[1]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied "
            f"({1 if x.ndim == 1 else x.shape[0]}x{x.shape[-1]} and "
            f"{weight.shape[1]}x{weight.shape[0]})"
        )
    data = x.data @ weight.data.T
    if bias is not None:
        data = data + bias.data
    return record(as_tensor(contiguous(data), dev), LinearBackward0, (x, weight, bias),
                  {"input": x, "weight": weight})
