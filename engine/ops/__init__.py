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

The ops live in one module per family (``ops_pointwise``, ``ops_reduction``,
``ops_shape``, ``ops_matmul``, ``ops_indexing``, ``ops_nn``; shared helpers in
``ops_common``); this module re-exports them all, so ``engine.ops.<name>`` keeps working.
"""

from __future__ import annotations

from .arith import (  # noqa: F401  (re-exported)
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
from .base import (  # noqa: F401  (re-exported)
    _DENSE_STRIDES,
    _TYPE_NAMES,
    Grads,
    OpNode,
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
    _short_name,
    _with_sizes,
    _wrap,
    modified_message,
    torch_type_string,
)
from .extrema import (  # noqa: F401  (re-exported)
    LinalgVectorNormBackward0,
    MaxBackward0,
    MaxBackward1,
    MaxResult,
    MinBackward0,
    MinBackward1,
    _along,
    _arg,
    _full,
    argmax,
    argmin,
    max,
    min,
    norm,
)
from .indexing import (  # noqa: F401  (re-exported)
    IndexBackward0,
    IndexPutImplBackward0,
    SelectBackward0,
    SelectBackwardBackward0,
    SliceBackward0,
    SliceBackwardBackward0,
    _advanced,
    _expand_key,
    _getitem_raw,
    _index_adv,
    _index_put_zeros,
    _is_full_slice,
    _scatter_zeros,
    index,
)
from .inplace import (  # noqa: F401  (re-exported)
    LEAF_INPLACE,
    CopyBackwards,
    FillBackward2,
    ZeroBackward0,
    _binary_,
    _check_leaf,
    _commit,
    _fill,
    add_,
    copy_,
    div_,
    fill_,
    mul_,
    sub_,
    zero_,
)
from .join import (  # noqa: F401  (re-exported)
    CatBackward0,
    RepeatBackward0,
    SplitBackward0,
    SplitWithSizesBackward0,
    StackBackward0,
    _narrow,
    _promoted,
    _split,
    cat,
    chunk,
    repeat,
    split,
    stack,
)
from .matmul import (  # noqa: F401  (re-exported)
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
from .nn import (  # noqa: F401  (re-exported)
    _REDUCTIONS,
    LogSoftmaxBackward0,
    MseLossBackward0,
    NllLossBackward0,
    SoftmaxBackward0,
    _softmax,
    cross_entropy,
    log_softmax,
    mse_loss,
    nll_loss,
    softmax,
)
from .pointwise import (  # noqa: F401  (re-exported)
    AbsBackward0,
    ClampBackward1,
    CosBackward0,
    MaskedFillBackward0,
    MaximumBackward0,
    MinimumBackward0,
    SinBackward0,
    SqrtBackward0,
    WhereBackward0,
    _compare,
    _extremum,
    _mask,
    _torch_dtype_name,
    abs,
    clamp,
    cos,
    eq,
    ge,
    gt,
    le,
    lt,
    masked_fill,
    maximum,
    minimum,
    ne,
    sin,
    sqrt,
    square,
    where,
)
from .reduction import (  # noqa: F401  (re-exported)
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
from .shape import (  # noqa: F401  (re-exported)
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
    detached,
    expand,
    reshape,
    t,
    to,
)
from .views import (  # noqa: F401  (re-exported)
    PermuteBackward0,
    SqueezeBackward0,
    SqueezeBackward1,
    SqueezeBackward2,
    TransposeBackward0,
    _view,
    _wrap_dim,
    contiguous,
    flatten,
    permute,
    squeeze,
    transpose,
    unsqueeze,
)
