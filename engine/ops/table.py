"""The table of supported ops: one row per op (or per way of calling it), each a
function of a module (``engine`` or ``torch``), its ``functional`` and leaf tensors, so
that the same row runs on both.  ``tests/engine/test_ops_parity.py`` checks every row against
PyTorch (values, gradients, backward node names; float32 and float64),
``tests/engine/test_device_arrays.py`` runs every row on a device array, and
``scenarios/_docs.py`` renders the table into docs/scenarios.md (the backward node
names there come from running each row on this engine).

Leaf values are drawn from (0.5, 1.5) (``log``, ``sqrt``, ``pow`` and ``div`` stay in
their domains); rows that need ties or constants make them from their leaves' device.

Mirrors the role of PyTorch's ``OpInfo`` database (``op_db``, which its own tests run every
op from), in a much smaller form: a row is one call, not a family of samples.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class OpRow:
    name: str  # unique, for test ids
    family: str  # its group in docs/scenarios.md (modules: see each group's comment below)
    api: str  # how a lesson writes it (PyTorch's spelling)
    fn: Callable[..., Any]  # fn(m, F, *leaves): m is engine or torch, F its functional
    shapes: tuple[tuple[int, ...], ...]  # the leaves' shapes
    departure: str = ""  # where the graph differs from PyTorch's (values agree)
    nodes: tuple[str, ...] = ()  # the op's own backward nodes (the rest of the row is glue)


def _c(m: Any, values: Any, like: Any) -> Any:
    """A constant on ``like``'s device, of ``like``'s dtype when float."""
    t = m.tensor(values, device=like.device)
    return t.to(like.dtype) if "float" in str(t.dtype) else t


def _ties(m: Any, a: Any) -> Any:
    """``a`` times 0 plus [[1, 3, 3], [2, 2, 0]]: ties for max/min/maximum, gradients
    still flowing to ``a``."""
    return a * 0.0 + _c(m, [[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], a)


M2 = ((2, 3),)
OPS: tuple[OpRow, ...] = (
    # pointwise (ops/arith.py, ops/pointwise.py)
    OpRow("add", "pointwise", "a + b, torch.add", lambda m, F, a, b: a + b, ((2, 3), (3,)),
          nodes=("AddBackward0",)),
    OpRow("sub", "pointwise", "a - b, 1 - a", lambda m, F, a, b: (a - b) + (1.0 - a),
          ((2, 3), (2, 1)),
          nodes=("SubBackward0", "RsubBackward1")),
    OpRow("mul", "pointwise", "a * b, torch.mul", lambda m, F, a, b: m.mul(a, b) * 2.0,
          ((2, 3), (2, 3)),
          nodes=("MulBackward0",)),
    OpRow("div", "pointwise", "a / b, 2 / a", lambda m, F, a, b: a / b + 2.0 / a,
          ((2, 3), (2, 3)),
          nodes=("DivBackward0", "MulBackward0", "ReciprocalBackward0")),
    OpRow("neg", "pointwise", "-a", lambda m, F, a: -a, M2,
          nodes=("NegBackward0",)),
    OpRow("pow", "pointwise", "a ** 3, a ** b, 2 ** a",
          lambda m, F, a, b: a ** 3 + a ** b + 2.0 ** a, ((2, 3), (2, 3)),
          nodes=("PowBackward2", "PowBackward0", "PowBackward1")),
    OpRow("exp", "pointwise", "torch.exp, a.exp()", lambda m, F, a: m.exp(a), M2,
          nodes=("ExpBackward0",)),
    OpRow("log", "pointwise", "a.log()", lambda m, F, a: a.log(), M2,
          nodes=("LogBackward0",)),
    OpRow("reciprocal", "pointwise", "a.reciprocal()", lambda m, F, a: a.reciprocal(), M2,
          nodes=("ReciprocalBackward0",)),
    OpRow("sigmoid", "pointwise", "torch.sigmoid, a.sigmoid()", lambda m, F, a: a.sigmoid(),
          M2,
          nodes=("SigmoidBackward0",)),
    OpRow("tanh", "pointwise", "torch.tanh, a.tanh()", lambda m, F, a: m.tanh(a), M2,
          nodes=("TanhBackward0",)),
    OpRow("relu", "pointwise", "a.relu(), F.relu", lambda m, F, a: F.relu(a - 1.0), M2,
          nodes=("ReluBackward0",)),
    OpRow("sqrt", "pointwise", "torch.sqrt, a.sqrt()", lambda m, F, a: m.sqrt(a), M2,
          nodes=("SqrtBackward0",)),
    OpRow("abs", "pointwise", "torch.abs, a.abs()", lambda m, F, a: (a - 1.0).abs(), M2,
          nodes=("AbsBackward0",)),
    OpRow("sin", "pointwise", "torch.sin, a.sin()", lambda m, F, a: m.sin(a), M2,
          nodes=("SinBackward0",)),
    OpRow("cos", "pointwise", "torch.cos, a.cos()", lambda m, F, a: a.cos(), M2,
          nodes=("CosBackward0",)),
    OpRow("square", "pointwise", "torch.square, a.square()", lambda m, F, a: a.square(), M2,
          nodes=("PowBackward0",)),
    OpRow("clamp", "pointwise", "a.clamp(min, max), torch.clamp",
          lambda m, F, a: m.clamp(a, 0.8, 1.2) + a.clamp(min=1.0), M2,
          nodes=("ClampBackward1",)),
    OpRow("maximum", "pointwise", "torch.maximum, torch.minimum (ties split the gradient)",
          lambda m, F, a, b: m.maximum(_ties(m, a), _ties(m, b) * 0.5 + 1.0)
          + m.minimum(a, b), ((2, 3), (2, 3)),
          nodes=("MaximumBackward0", "MinimumBackward0")),
    OpRow("where", "pointwise", "torch.where(cond, a, b)",
          lambda m, F, a, b: m.where(a > b, a, b) + m.where(a > 1.0, a, 0.0),
          ((2, 3), (2, 3)),
          nodes=("WhereBackward0",)),
    OpRow("masked_fill", "pointwise", "a.masked_fill(mask, value)",
          lambda m, F, a: a.masked_fill(a > 1.0, 0.5), M2,
          nodes=("MaskedFillBackward0",)),
    OpRow("compare", "pointwise", "a < b, a <= b, a > b, a >= b, a.eq(b), a.ne(b)",
          lambda m, F, a, b: a * ((a < b).double() + (a >= b).double() + a.eq(b).double()
                                  + a.ne(b).double() + a.le(b).double() + a.gt(b).double()),
          ((2, 3), (2, 3)),
          nodes=()),
    # reductions (ops/reduction.py, ops/extrema.py)
    OpRow("sum", "reduction", "torch.sum, a.sum(dim, keepdim)",
          lambda m, F, a: m.sum(a) + a.sum(1).sum() + a.sum(0, keepdim=True).sum(), M2,
          nodes=("SumBackward0", "SumBackward1")),
    OpRow("mean", "reduction", "a.mean(dim, keepdim)",
          lambda m, F, a: a.mean() + a.mean(1).sum(), M2,
          nodes=("MeanBackward0", "MeanBackward1")),
    OpRow("max", "reduction", "a.max(), torch.max (ties share the gradient)",
          lambda m, F, a: m.max(_ties(m, a)), M2,
          nodes=("MaxBackward1",)),
    OpRow("max-dim", "reduction", "a.max(dim, keepdim) -> (values, indices)",
          lambda m, F, a: _ties(m, a).max(1).values, M2,
          nodes=("MaxBackward0",)),
    OpRow("min", "reduction", "a.min(), torch.min", lambda m, F, a: m.min(_ties(m, a)), M2,
          nodes=("MinBackward1",)),
    OpRow("min-dim", "reduction", "a.min(dim, keepdim)",
          lambda m, F, a: _ties(m, a).min(0, keepdim=True)[0], M2,
          nodes=("MinBackward0",)),
    OpRow("norm", "reduction", "a.norm(), a.norm(dim=d), a.norm(p=1)",
          lambda m, F, a: a.norm() + a.norm(dim=1).sum() + a.norm(p=1), M2,
          nodes=("LinalgVectorNormBackward0",)),
    OpRow("norm-p", "reduction", "a.norm(p) for any p: 3, 0.5, inf, -inf, 0, torch.norm(a, p, dim)",
          lambda m, F, a: a.norm(p=3) + a.norm(0.5, dim=1).sum() + a.norm(float("inf"))
          + m.norm(a, float("-inf"), dim=0, keepdim=True).sum() + a.norm(p=0)
          + a.norm(1.5, dim=(0, 1)) + a.norm(-2.0), M2,
          nodes=("LinalgVectorNormBackward0",)),
    # shapes and views (ops/shape.py, ops/reduction.py's expand, ops/views.py, ops/join.py)
    OpRow("reshape", "shape", "a.reshape, a.view", lambda m, F, a: a.reshape(3, 2), M2,
          nodes=("ViewBackward0",)),
    OpRow("expand", "shape", "a.expand", lambda m, F, a: a.expand(2, 3), ((1, 3),),
          nodes=("ExpandBackward0",)),
    OpRow("t", "shape", "a.t(), a.T", lambda m, F, a: a.t(), M2,
          nodes=("TBackward0",)),
    OpRow("clone", "shape", "a.clone()", lambda m, F, a: a.clone(), M2,
          nodes=("CloneBackward0",)),
    OpRow("unsqueeze", "shape", "a.unsqueeze(dim)", lambda m, F, a: a.unsqueeze(1), M2,
          nodes=("UnsqueezeBackward0",)),
    OpRow("squeeze", "shape", "a.squeeze()", lambda m, F, a: a.squeeze(), ((2, 1, 3),),
          nodes=("SqueezeBackward0",)),
    OpRow("squeeze-dim", "shape", "a.squeeze(dim), a.squeeze(dims)",
          lambda m, F, a: a.squeeze(1) * a.squeeze((1,)),
          ((2, 1, 3),),
          nodes=("SqueezeBackward1", "SqueezeBackward2")),
    OpRow("transpose", "shape", "a.transpose(d0, d1)", lambda m, F, a: a.transpose(0, 2),
          ((2, 3, 2),),
          nodes=("TransposeBackward0",)),
    OpRow("permute", "shape", "a.permute(dims)", lambda m, F, a: a.permute(2, 0, 1),
          ((2, 3, 2),),
          nodes=("PermuteBackward0",)),
    OpRow("flatten", "shape", "a.flatten(start, end)", lambda m, F, a: a.flatten(), M2,
          nodes=("ViewBackward0",)),
    OpRow("contiguous", "shape", "a.contiguous()", lambda m, F, a: a.t().contiguous(), M2,
          nodes=("CloneBackward0",)),
    OpRow("repeat", "shape", "a.repeat(sizes)", lambda m, F, a: a.repeat(2, 1, 2), M2,
          nodes=("RepeatBackward0",)),
    OpRow("cat", "shape", "torch.cat(tensors, dim)",
          lambda m, F, a, b: m.cat([a, b, a], 1), ((2, 3), (2, 1)),
          nodes=("CatBackward0",)),
    OpRow("stack", "shape", "torch.stack(tensors, dim)",
          lambda m, F, a, b: m.stack([a, b], 1), ((2, 3), (2, 3)),
          nodes=("StackBackward0",)),
    OpRow("split", "shape", "a.split(size, dim), a.chunk(n, dim)",
          lambda m, F, a: a.split(2, 1)[1] * 2.0 + a.chunk(2, 1)[0][:, :1], ((2, 4),),
          nodes=("SplitBackward0",)),
    OpRow("split-sizes", "shape", "a.split([sizes], dim)",
          lambda m, F, a: a.split([1, 3], 1)[1], ((2, 4),),
          nodes=("SplitWithSizesBackward0",)),
    # matrix products (ops/matmul.py)
    OpRow("matmul", "matmul", "a @ b, torch.matmul, a.mm(b)",
          lambda m, F, a, b: m.matmul(a, b), ((2, 3), (3, 2)),
          nodes=("MmBackward0",)),
    OpRow("mv", "matmul", "matrix @ vector", lambda m, F, a, b: a @ b, ((2, 3), (3,)),
          nodes=("MvBackward0",)),
    OpRow("dot", "matmul", "vector @ vector", lambda m, F, a, b: a @ b, ((3,), (3,)),
          nodes=("DotBackward0",)),
    OpRow("vecmat", "matmul", "vector @ matrix", lambda m, F, a, b: a @ b, ((3,), (3, 2)),
          nodes=("UnsqueezeBackward0", "MmBackward0", "SqueezeBackward4")),
    OpRow("matmul-batched", "matmul", "batch @ batch (torch.bmm's way)",
          lambda m, F, a, b: a @ b, ((2, 3, 4), (2, 4, 5)),
          nodes=("ExpandBackward0", "ViewBackward0", "BmmBackward0", "UnsafeViewBackward0")),
    OpRow("matmul-broadcast", "matmul", "batch dims broadcast: (2, 1, n, m) @ (5, m, p)",
          lambda m, F, a, b: m.matmul(a, b), ((2, 1, 3, 4), (5, 4, 2)),
          nodes=("ExpandBackward0", "CloneBackward0", "UnsafeViewBackward0",
                 "BmmBackward0")),
    OpRow("matmul-fold", "matmul", "batch @ matrix, batch @ vector (folded into mm, mv)",
          lambda m, F, a, b, v: (a @ b).sum(-1) + a @ v, ((2, 3, 4), (4, 5), (4,)),
          nodes=("ViewBackward0", "MmBackward0", "MvBackward0", "UnsafeViewBackward0")),
    OpRow("matmul-fold-right", "matmul", "matrix @ batch, vector @ batch",
          lambda m, F, a, b, v: (a @ b).sum(-1) + (v @ b).sum(-1, keepdim=True),
          ((3, 4), (2, 4, 5), (4,)),
          nodes=("TransposeBackward0", "TBackward0", "CloneBackward0", "MmBackward0",
                 "MvBackward0", "UnsafeViewBackward0")),
    OpRow("matmul-batch-of-one", "matmul", "(1, n, m) @ (b, m, p), batch @ vector",
          lambda m, F, a, b, v: (a @ b).sum(-1) + (b @ v).sum(-1, keepdim=True),
          ((1, 3, 4), (2, 4, 5), (5,)),
          nodes=("SqueezeBackward1", "MmBackward0", "MvBackward0", "UnsafeViewBackward0")),
    # indexing (ops/indexing.py)
    OpRow("index-int-slice", "indexing", "a[1], a[:, 1:], a[0, 1:]",
          lambda m, F, a: a[1] + a[:, 1:][0, 1:].sum(), M2,
          nodes=("SelectBackward0", "SliceBackward0")),
    OpRow("index-ellipsis-none", "indexing", "a[..., 1], a[None], a[:, None]",
          lambda m, F, a: a[..., 1].sum() + a[None].sum() + a[:, None].sum(), M2,
          nodes=("UnsqueezeBackward0", "SelectBackward0")),
    OpRow("index-mask", "indexing", "a[a > 1] (a boolean mask)",
          lambda m, F, a: a[a > 1.0], M2,
          nodes=("IndexBackward0",)),
    OpRow("index-list", "indexing", "a[[0, 1, 1]], a[:, [2, 0]], a[index_tensor]",
          lambda m, F, a: a[[0, 1, 1]].sum(0) + a[:, [2, 0]].sum()
          + a[_c(m, [1, 0], a)].sum(), M2,
          nodes=("IndexBackward0",)),
    # nn (ops/nn.py; torch.nn.functional)
    OpRow("softmax", "nn", "a.softmax(dim), F.softmax",
          lambda m, F, a: F.softmax(a, 1) * _c(m, [1.0, 2.0, 3.0], a), M2,
          nodes=("SoftmaxBackward0",)),
    OpRow("log_softmax", "nn", "a.log_softmax(dim), F.log_softmax",
          lambda m, F, a: a.log_softmax(1) * _c(m, [1.0, 2.0, 3.0], a), M2,
          nodes=("LogSoftmaxBackward0",)),
    OpRow("mse_loss", "nn", "F.mse_loss(input, target)",
          lambda m, F, a, b: F.mse_loss(a, b), ((2, 3), (2, 3)),
          nodes=("MseLossBackward0",)),
    OpRow("cross_entropy", "nn", "F.cross_entropy(logits, classes)",
          lambda m, F, a: F.cross_entropy(a, _c(m, [2, 0], a)), M2,
          nodes=("NllLossBackward0", "LogSoftmaxBackward0")),
    OpRow("linear", "nn", "F.linear(x, weight, bias)",
          lambda m, F, x, w, b: F.linear(x, w, b), ((2, 3), (4, 3), (4,)),
          "one LinearBackward0 node with three inputs, where PyTorch records TBackward0 "
          "and AddmmBackward0",
          nodes=("LinearBackward0",)),
    # conversions (ops/shape.py)
    OpRow("float", "conversion", "a.float(), a.double(), a.type_as(b), a.to(dtype)",
          lambda m, F, a, b: a.float().double() * 1.0 + a.type_as(b), ((2, 3), (2, 3)),
          nodes=("ToCopyBackward0",)),
    # in place (ops/inplace.py), on a non-leaf (a leaf that requires grad refuses, as in PyTorch)
    OpRow("add_", "inplace", "a.add_(b), a.sub_(b)",
          lambda m, F, a, b: (a * 1.0).add_(b).sub_(a), ((2, 3), (2, 3)),
          nodes=("SubBackward0", "AddBackward0")),
    OpRow("mul_", "inplace", "a.mul_(b), a.div_(b)",
          lambda m, F, a, b: (a * 1.0).mul_(b).div_(a), ((2, 3), (2, 3)),
          nodes=("DivBackward0", "MulBackward0")),
    OpRow("zero_", "inplace", "a.zero_(), a.fill_(value)",
          lambda m, F, a: (a * 2.0).zero_() + (a * 1.0).fill_(2.0) + a, M2,
          nodes=("ZeroBackward0", "FillBackward2")),
    OpRow("copy_", "inplace", "a.copy_(src)",
          lambda m, F, a, b: (a * 1.0).copy_(b), ((2, 3), (2, 3)),
          nodes=("CopyBackwards",)),
)
