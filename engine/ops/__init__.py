"""Forward ops and their backward nodes: ATen's ops and ``tools/autograd/derivatives.yaml``.

Each op records one node named as PyTorch names it (``MulBackward0``, ``SumBackward1``,
...), with the same next edges (a Python scalar operand is a constant: its edge is
invalid, as in PyTorch), so the backward graph has PyTorch's shape and sequence numbers.
A node is made with everything it keeps: its saved tensors and its other fields are
given to its constructor (``base.OpNode``, ``base.record``), never set on it afterwards.
Every backward formula is written with Tensor ops, so a backward run with
``create_graph=True`` records a graph of its own (double backward).  As in PyTorch, the
reduction of a broadcast gradient to an input's shape is not done by the node but by
the engine's ``validate_outputs`` (``at::sum_to``).  Each op lays its output out with
PyTorch's strides (a view keeps its base's, an elementwise result gets
TensorIterator's), by the rules in ``strides.py``, because ``reshape`` records a
different node for a non-contiguous input.

Array modules: where ATen dispatches a kernel to its tensors' device, an op here makes
its arrays with the module of its inputs (``device.array_module``: NumPy or CuPy),
through NumPy's ufuncs (which CuPy arrays take over) and array methods, so a CuPy array
never goes through the host.

One module per family, each importing only those listed above it:

- ``base``: ``OpNode`` (saved tensors and their versions, declared fields), ``record``,
  the elementwise kernel, the helpers the families share;
- ``arith``: ``+ - * /``, unary minus, ``maximum``/``minimum``, ``where``, comparisons;
- ``pointwise``: the unary functions (``exp``, ``log``, ``relu``, ``sigmoid``, ``tanh``,
  ``sqrt``, ``abs``, ``sin``, ``cos``, ``clamp``, ``masked_fill``) and the powers;
- ``shape``: ``reshape`` (a view, ``_reshape_alias`` or clone + ``_unsafe_view``),
  ``flatten``, ``clone``, ``contiguous``, ``to``;
- ``reduction``: ``sum``, ``mean``, their dual ``expand``, and ``sum_to``;
- ``views``: ``t``, ``unsqueeze``, ``squeeze``, ``transpose``, ``permute``;
- ``indexing``: ``x[key]`` (select, slice, alias, advanced ``index``);
- ``join``: ``cat``, ``stack``, ``split``/``chunk``, ``repeat``;
- ``extrema``: ``max``, ``min``, ``argmax``/``argmin``, ``norm``;
- ``matmul``: ``mm``, ``dot``, ``mv``, ``bmm``, ``matmul`` (batched, broadcast);
- ``grad_ops``: what backward formulas call (``sigmoid_backward``, ``tanh_backward``,
  ``threshold_backward``, ``sgn``, ``mul`` by a Scalar), for PyTorch's double-backward nodes;
- ``nn``: ``softmax``, ``log_softmax``, ``mse_loss``, ``nll_loss``, ``cross_entropy``,
  ``linear``;
- ``inplace``: ``add_`` ... ``copy_``, the version counter;
- ``table``: the op table that the parity test and docs/scenarios.md read.

This package exports the ops and their nodes; the helpers the families share are in
``base``, and a name private to a module stays there.
"""

from __future__ import annotations

from .arith import (
    AddBackward0,
    DivBackward0,
    MaximumBackward0,
    MinimumBackward0,
    MulBackward0,
    NegBackward0,
    RsubBackward1,
    SubBackward0,
    WhereBackward0,
    add,
    compare,
    div,
    eq,
    ge,
    gt,
    le,
    lt,
    maximum,
    minimum,
    mul,
    ne,
    neg,
    rsub,
    sub,
    where,
)
from .extrema import (
    LinalgVectorNormBackward0,
    MaxBackward0,
    MaxBackward1,
    MaxResult,
    MinBackward0,
    MinBackward1,
    argmax,
    argmin,
    max,
    min,
    norm,
)
from .indexing import (
    AliasBackward0,
    IndexBackward0,
    IndexPutImplBackward0,
    SelectBackward0,
    SelectBackwardBackward0,
    SliceBackward0,
    SliceBackwardBackward0,
    index,
)
from .inplace import (
    CopyBackwards,
    FillBackward2,
    ZeroBackward0,
    add_,
    copy_,
    div_,
    fill_,
    mul_,
    sub_,
    zero_,
)
from .join import (
    CatBackward0,
    RepeatBackward0,
    SplitBackward0,
    SplitWithSizesBackward0,
    StackBackward0,
    cat,
    chunk,
    repeat,
    split,
    stack,
)
from .matmul import (
    DotBackward0,
    MmBackward0,
    MvBackward0,
    SqueezeBackward4,
    dot,
    matmul,
    mm,
    mv,
)
from .nn import (
    LinearBackward0,
    LogSoftmaxBackward0,
    MseLossBackward0,
    NllLossBackward0,
    SoftmaxBackward0,
    cross_entropy,
    linear,
    log_softmax,
    mse_loss,
    nll_loss,
    softmax,
)
from .pointwise import (
    AbsBackward0,
    ClampBackward1,
    CosBackward0,
    ExpBackward0,
    LogBackward0,
    MaskedFillBackward0,
    PowBackward0,
    PowBackward1,
    PowBackward2,
    ReciprocalBackward0,
    ReluBackward0,
    SigmoidBackward0,
    SinBackward0,
    SqrtBackward0,
    TanhBackward0,
    abs,
    clamp,
    cos,
    exp,
    log,
    masked_fill,
    pow,
    reciprocal,
    relu,
    rpow,
    sigmoid,
    sin,
    sqrt,
    square,
    tanh,
)
from .reduction import (
    ExpandBackward0,
    MeanBackward0,
    MeanBackward1,
    SumBackward0,
    SumBackward1,
    expand,
    is_expandable_to,
    mean,
    sum,
    sum_to,
)
from .shape import (
    CloneBackward0,
    ReshapeAliasBackward0,
    ToCopyBackward0,
    UnsafeViewBackward0,
    ViewBackward0,
    clone,
    contiguous,
    detached,
    flatten,
    reshape,
    to,
)
from .views import (
    PermuteBackward0,
    SqueezeBackward0,
    SqueezeBackward1,
    SqueezeBackward2,
    TBackward0,
    TransposeBackward0,
    UnsqueezeBackward0,
    permute,
    squeeze,
    t,
    transpose,
    unsqueeze,
)

__all__ = [  # grouped as the imports are
    # arith
    "AddBackward0", "DivBackward0", "MaximumBackward0", "MinimumBackward0", "MulBackward0",
    "NegBackward0", "RsubBackward1", "SubBackward0", "WhereBackward0", "add", "compare", "div",
    "eq", "ge", "gt", "le", "lt", "maximum", "minimum", "mul", "ne", "neg", "rsub", "sub",
    "where",
    # extrema
    "LinalgVectorNormBackward0", "MaxBackward0", "MaxBackward1", "MaxResult", "MinBackward0",
    "MinBackward1", "argmax", "argmin", "max", "min", "norm",
    # indexing
    "AliasBackward0", "IndexBackward0", "IndexPutImplBackward0", "SelectBackward0",
    "SelectBackwardBackward0", "SliceBackward0", "SliceBackwardBackward0", "index",
    # inplace
    "CopyBackwards", "FillBackward2", "ZeroBackward0", "add_", "copy_", "div_", "fill_", "mul_",
    "sub_", "zero_",
    # join
    "CatBackward0", "RepeatBackward0", "SplitBackward0", "SplitWithSizesBackward0",
    "StackBackward0", "cat", "chunk", "repeat", "split", "stack",
    # matmul
    "DotBackward0", "MmBackward0", "MvBackward0", "SqueezeBackward4", "dot", "matmul", "mm",
    "mv",
    # nn
    "LinearBackward0", "LogSoftmaxBackward0", "MseLossBackward0", "NllLossBackward0",
    "SoftmaxBackward0", "cross_entropy", "linear", "log_softmax", "mse_loss", "nll_loss",
    "softmax",
    # pointwise
    "AbsBackward0", "ClampBackward1", "CosBackward0", "ExpBackward0", "LogBackward0",
    "MaskedFillBackward0", "PowBackward0", "PowBackward1", "PowBackward2",
    "ReciprocalBackward0", "ReluBackward0", "SigmoidBackward0", "SinBackward0",
    "SqrtBackward0", "TanhBackward0", "abs", "clamp", "cos", "exp", "log", "masked_fill",
    "pow", "reciprocal", "relu", "rpow", "sigmoid", "sin", "sqrt", "square", "tanh",
    # reduction
    "ExpandBackward0", "MeanBackward0", "MeanBackward1", "SumBackward0", "SumBackward1",
    "expand", "is_expandable_to", "mean", "sum", "sum_to",
    # shape
    "CloneBackward0", "ReshapeAliasBackward0", "ToCopyBackward0", "UnsafeViewBackward0",
    "ViewBackward0", "clone", "contiguous", "detached", "flatten", "reshape", "to",
    # views
    "PermuteBackward0", "SqueezeBackward0", "SqueezeBackward1", "SqueezeBackward2",
    "TBackward0", "TransposeBackward0", "UnsqueezeBackward0", "permute", "squeeze", "t",
    "transpose", "unsqueeze",
]
