"""A multithreaded re-implementation of PyTorch's autograd engine, on NumPy.

Torch-like API: ``from autograd_tui import engine as torch``-style edits run most autograd
programs.  See ``docs/engine.md`` for how each piece maps to engine.cpp.
"""

from __future__ import annotations

from . import autograd, functional, optim
from .autograd import queue_callback
from .creation import (  # noqa: A004  (torch's names: float32, bool, ...)
    arange,
    bool,
    double,
    eye,
    float,
    float16,
    float32,
    float64,
    half,
    int,
    int32,
    int64,
    long,
    manual_seed,
    rand,
    uint8,
)
from .device import describe_devices, gpu_available
from .dtypes import get_default_dtype, set_default_dtype
from .engine import (
    MAX_DEPTH,
    Engine,
    get_default_engine,
    set_default_engine,
    shutdown_default_engine,
    use_engine,
)
from .events import Event, ListObserver
from .function import Function, FunctionCtx, once_differentiable
from .grad_mode import (
    detect_anomaly,
    enable_grad,
    is_anomaly_enabled,
    is_grad_enabled,
    no_grad,
    set_detect_anomaly,
    set_grad_enabled,
)
from .graph import AccumulateGrad, Edge, GraphRoot, Node
from .ops import (  # noqa: A004  (torch's names: sum, max, abs, ...)
    abs,
    add,
    argmax,
    argmin,
    cat,
    chunk,
    clamp,
    cos,
    div,
    eq,
    exp,
    flatten,
    ge,
    gt,
    le,
    log,
    log_softmax,
    lt,
    masked_fill,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    mm,
    mul,
    ne,
    neg,
    norm,
    permute,
    pow,
    relu,
    repeat,
    reshape,
    sigmoid,
    sin,
    softmax,
    split,
    sqrt,
    square,
    squeeze,
    stack,
    sub,
    sum,
    tanh,
    transpose,
    unsqueeze,
    where,
)
from .tensor import Tensor, ones, ones_like, randn, tensor, zeros, zeros_like

autograd.Function = Function  # type: ignore[attr-defined]  # torch.autograd.Function

__all__ = [
    "MAX_DEPTH", "AccumulateGrad", "Edge", "Engine", "Event", "Function", "FunctionCtx",
    "GraphRoot", "ListObserver", "Node", "Tensor", "autograd", "describe_devices",
    "detect_anomaly", "enable_grad", "functional", "get_default_dtype", "get_default_engine",
    "gpu_available", "optim",
    "is_anomaly_enabled", "is_grad_enabled", "no_grad", "once_differentiable", "ones",
    "ones_like", "queue_callback", "randn", "set_default_dtype", "set_default_engine",
    "set_detect_anomaly", "set_grad_enabled", "shutdown_default_engine", "tensor",
    "use_engine", "zeros", "zeros_like",
    # torch-style functions (``ops``) and creation (``creation``)
    "abs", "add", "arange", "argmax", "argmin", "bool", "cat", "chunk", "clamp", "cos", "div",
    "double", "eq", "exp", "eye", "flatten", "float", "float16", "float32", "float64", "ge",
    "gt", "half", "int", "int32", "int64", "le", "log", "log_softmax", "long", "lt",
    "manual_seed", "masked_fill", "matmul", "max", "maximum", "mean", "min", "minimum", "mm",
    "mul", "ne", "neg", "norm", "permute", "pow", "rand", "relu", "repeat", "reshape",
    "sigmoid", "sin", "softmax", "split", "sqrt", "square", "squeeze", "stack", "sub", "sum",
    "tanh", "transpose", "uint8", "unsqueeze", "where",
]
