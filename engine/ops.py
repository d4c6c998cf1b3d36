"""Forward ops and their backward nodes.

Mirrors ATen's ops and ``tools/autograd/derivatives.yaml``: each op records one
node named as PyTorch names it (``MulBackward0``, ``SumBackward1``, ...), with
the same next edges (a Python scalar operand is a constant: its edge is
invalid, as in PyTorch), so the backward graph has PyTorch's shape and
sequence numbers.  Every backward formula is written with Tensor ops, so a
backward run with ``create_graph=True`` records a graph of its own (double
backward).  As in PyTorch, the reduction of a broadcast gradient to an
input's shape is not done by the node but by the engine's ``validate_outputs``
(``at::sum_to``).  Each op lays its output out with PyTorch's strides (a view
keeps its base's, an elementwise result gets TensorIterator's), by the rules
in ``strides.py``, because ``reshape`` records a different node for a
non-contiguous input.

Departures: ``functional.linear`` is one ``LinearBackward0`` node with three
inputs (input, weight, bias), the seeds' LinearFunction, where PyTorch records
``TBackward0`` + ``AddmmBackward0``; ReLU's double backward goes through a
mask multiply rather than ``threshold_backward``.

Array modules: where ATen dispatches a kernel to its tensors' device, an op here
makes its arrays with the module of its inputs (``device.array_module``: NumPy
or CuPy), through NumPy's ufuncs (which CuPy arrays take over) and array
methods, so a CuPy array never goes through the host.

The ops live in one module per family (``ops_pointwise``, ``ops_reduction``,
``ops_shape``, ``ops_matmul``, ``ops_indexing``, ``ops_nn``; shared helpers in
``ops_common``); this module re-exports them all, so ``engine.ops.<name>`` keeps working.
"""

from __future__ import annotations

from .ops_common import (  # noqa: F401  (re-exported)
    _DENSE_STRIDES,
    Grads,
    _check_broadcast,
    _check_same_device,
    _computes,
    _data,
    _elementwise,
    _is_dense,
    _new,
    _norm_dims,
    _record,
    _shape_of,
    _with_sizes,
    _wrap,
)
from .ops_indexing import (  # noqa: F401  (re-exported)
    SelectBackward0,
    SelectBackwardBackward0,
    SliceBackward0,
    SliceBackwardBackward0,
    _getitem_raw,
    _is_full_slice,
    _scatter_zeros,
    index,
)
from .ops_matmul import (  # noqa: F401  (re-exported)
    DotBackward0,
    LinearBackward0,
    MmBackward0,
    MvBackward0,
    _mat,
    dot,
    linear,
    matmul,
    mm,
    mv,
)
from .ops_pointwise import (  # noqa: F401  (re-exported)
    AddBackward0,
    DivBackward0,
    ExpBackward0,
    LogBackward0,
    MulBackward0,
    NegBackward0,
    PowBackward0,
    PowBackward1,
    PowBackward2,
    ReciprocalBackward0,
    ReluBackward0,
    RsubBackward1,
    SigmoidBackward0,
    SubBackward0,
    TanhBackward0,
    _binary,
    _unary,
    add,
    compare,
    div,
    exp,
    log,
    mul,
    neg,
    pow,
    reciprocal,
    relu,
    rpow,
    rsub,
    sigmoid,
    sub,
    tanh,
    where_const,
    zeros_like_t,
)
from .ops_reduction import (  # noqa: F401  (re-exported)
    MeanBackward0,
    MeanBackward1,
    SumBackward0,
    SumBackward1,
    _reduce,
    _unsqueeze_shape,
    is_expandable_to,
    mean,
    sum,
    sum_to,
)
from .ops_shape import (  # noqa: F401  (re-exported)
    AliasBackward0,
    CloneBackward0,
    ExpandBackward0,
    ReshapeAliasBackward0,
    SqueezeBackward4,
    TBackward0,
    ToCopyBackward0,
    UnsafeViewBackward0,
    UnsqueezeBackward0,
    ViewBackward0,
    _clone,
    _squeeze0,
    _unsqueeze0,
    clone,
    expand,
    reshape,
    t,
    to,
)
