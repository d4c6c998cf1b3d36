"""A multithreaded re-implementation of PyTorch's autograd engine, on NumPy.

Torch-like API: ``from autograd_tui import engine as torch``-style edits run most autograd
programs.  See ``docs/engine.md`` for how each piece maps to engine.cpp.
"""

from __future__ import annotations

from . import autograd, functional
from .autograd import queue_callback
from .device import describe_devices, gpu_available
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
from .tensor import Tensor, ones, ones_like, randn, tensor, zeros, zeros_like

autograd.Function = Function  # type: ignore[attr-defined]  # torch.autograd.Function

__all__ = [
    "MAX_DEPTH", "AccumulateGrad", "Edge", "Engine", "Event", "Function", "FunctionCtx",
    "GraphRoot", "ListObserver", "Node", "Tensor", "autograd", "describe_devices",
    "detect_anomaly", "enable_grad", "functional", "get_default_engine", "gpu_available",
    "is_anomaly_enabled", "is_grad_enabled", "no_grad", "once_differentiable", "ones",
    "ones_like", "queue_callback", "randn", "set_default_engine",
    "set_detect_anomaly", "set_grad_enabled", "shutdown_default_engine", "tensor",
    "use_engine", "zeros", "zeros_like",
]
